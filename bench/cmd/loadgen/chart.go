package main

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
)

// The chart: one row per workload, p50 latency (bars, p99 as a tick) on the
// left and throughput on the right, grouped by concurrency, one colour per
// server, both axes logarithmic. Drawn with image/draw and the built-in font.

var (
	white     = color.RGBA{255, 255, 255, 255}
	black     = color.RGBA{0, 0, 0, 255}
	gridGray  = color.RGBA{225, 225, 225, 255}
	axisGray  = color.RGBA{120, 120, 120, 255}
	textGray  = color.RGBA{60, 60, 60, 255}
	errRed    = color.RGBA{200, 0, 0, 255}
	palette   = []color.RGBA{{0, 90, 160, 255}, {86, 180, 233, 255}, {230, 159, 0, 255}, {0, 158, 115, 255}, {204, 121, 167, 255}, {213, 94, 0, 255}}
	serverCol = map[string]color.RGBA{
		"stepgraph-async": palette[0], "stepgraph-sync": palette[1], "python": palette[2], "js": palette[3], "aegra": palette[4],
		// The app servers (react only, a panel of their own) take the colors
		// of their kind.
		"stepgraph-dev-async": palette[0], "stepgraph-dev-sync": palette[1], "python-app": palette[2],
	}
)

func colorOf(i int, name string) color.RGBA {
	if c, ok := serverCol[name]; ok {
		return c
	}
	return palette[i%len(palette)]
}

const (
	chartW = 1400
	panelW = 690
	panelH = 330
	gapX   = 10
)

// renderChart draws the results as a PNG.
func renderChart(r *Results) ([]byte, error) {
	var rows []*workload
	for _, w := range workloads {
		if r.hasWorkload(w.Name) {
			rows = append(rows, w)
		}
	}
	// The legend: one entry per server, wrapped to the chart's width.
	type entry struct {
		x, y  int
		label string
		col   color.RGBA
	}
	var legend []entry
	lx, ly := 10, 64
	for i, s := range r.Servers {
		// The peak over the workloads, which every server ran alike (not the
		// fairness flood, which only the servers with organizations ran).
		label := fmt.Sprintf("%s (peak RSS %s MiB)", s.Name, mib(s.workloadPeakKB()))
		w := 32 + textWidth(label, 2) + 30
		if lx > 10 && lx+w > chartW-10 {
			lx, ly = 10, ly+34
		}
		legend = append(legend, entry{lx, ly, label, colorOf(i, s.Name)})
		lx += w
	}
	top := ly + 46
	h := top + len(rows)*(panelH+10) + 10
	img := image.NewRGBA(image.Rect(0, 0, chartW, h))
	draw.Draw(img, img.Bounds(), &image.Uniform{white}, image.Point{}, draw.Src)

	drawText(img, 10, 10, fmt.Sprintf("stepgraph benchmark %s: p50 latency (bar) and p99 (tick), throughput; log scales", r.Date), 2, black)
	errs := 0
	for _, s := range r.Servers {
		for _, c := range s.Cells {
			errs += c.Errors
		}
	}
	drawText(img, 10, 34, fmt.Sprintf("%d cores, %.1f GiB; timed iterations per cell: %s; errors: %d",
		r.Machine.Cores, float64(r.Machine.MemTotalKB)/1024/1024, countsText(r.Iterations), errs), 2, textGray)
	for _, e := range legend {
		fillRect(img, e.x, e.y, 24, 24, e.col)
		drawText(img, e.x+32, e.y+5, e.label, 2, black)
	}

	for ri, w := range rows {
		y := top + ri*(panelH+10)
		lat := panelData{title: w.Name + ": latency ms (p50 bar, p99 tick)"}
		if w.stream != nil {
			lat.title = w.Name + ": first event ms (p50 bar, p99 tick)"
			if w.needsModel {
				lat.title = w.Name + ": first token ms (p50 bar, p99 tick)"
			}
		}
		thr := panelData{title: w.Name + ": throughput per s"}
		if w.stream != nil {
			thr.title = w.Name + ": streamed runs per s"
		}
		for si, s := range r.Servers {
			for _, conc := range r.Concurrency {
				c := r.cell(s.Name, w.Name, conc)
				if c == nil {
					continue
				}
				b := bar{server: si, name: s.Name, conc: conc, errs: c.Errors}
				lb, tb := b, b
				lb.v, lb.tick = c.P50ms, c.P99ms
				if st := c.Stream; st != nil {
					lb.v, lb.tick = st.FirstEventP50ms, st.FirstEventP99ms
					if w.needsModel {
						lb.v, lb.tick = st.FirstTokenP50ms, st.FirstTokenP99ms
					}
				}
				tb.v = c.Throughput
				lat.bars = append(lat.bars, lb)
				thr.bars = append(thr.bars, tb)
			}
		}
		drawPanel(img, 10, y, lat, r)
		drawPanel(img, 10+panelW+gapX, y, thr, r)
	}

	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type bar struct {
	server int
	name   string
	conc   int
	v      float64
	tick   float64 // 0: none
	errs   int
}

type panelData struct {
	title string
	bars  []bar
}

func drawPanel(img *image.RGBA, x0, y0 int, d panelData, r *Results) {
	strokeRect(img, x0, y0, panelW, panelH, axisGray)
	drawText(img, x0+10, y0+10, d.title, 2, black)
	const left, right, top, bottom = 70, 12, 44, 40
	px0, py0 := x0+left, y0+top
	pw, ph := panelW-left-right, panelH-top-bottom

	lo, hi := math.Inf(1), math.Inf(-1)
	for _, b := range d.bars {
		for _, v := range []float64{b.v, b.tick} {
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		drawText(img, px0+10, py0+ph/2, "no data", 2, textGray)
		return
	}
	dlo, dhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dhi <= dlo {
		dhi = dlo + 1
	}
	yOf := func(v float64) int {
		if v <= 0 {
			return py0 + ph
		}
		f := (math.Log10(v) - dlo) / (dhi - dlo)
		return py0 + ph - int(math.Round(f*float64(ph)))
	}
	for dec := dlo; dec <= dhi; dec++ {
		y := yOf(math.Pow(10, dec))
		hline(img, px0, px0+pw, y, gridGray)
		lab := axisLabel(math.Pow(10, dec))
		drawText(img, px0-8-textWidth(lab, 2), y-7, lab, 2, textGray)
	}
	vline(img, px0, py0, py0+ph, axisGray)
	hline(img, px0, px0+pw, py0+ph, axisGray)

	nServers := len(r.Servers)
	groups := r.Concurrency
	slot := pw / max(1, len(groups))
	const pad, gap = 14, 4
	bw := (slot - 2*pad - gap*(nServers-1)) / max(1, nServers)
	for gi, conc := range groups {
		gx := px0 + gi*slot
		lab := fmt.Sprintf("c=%d", conc)
		drawText(img, gx+(slot-textWidth(lab, 2))/2, py0+ph+12, lab, 2, black)
		if gi > 0 {
			vline(img, gx, py0+ph-4, py0+ph+4, axisGray)
		}
		for _, b := range d.bars {
			if b.conc != conc {
				continue
			}
			bx := gx + pad + b.server*(bw+gap)
			col := colorOf(b.server, b.name)
			top := yOf(b.v)
			fillRect(img, bx, top, bw, py0+ph-top, col)
			labY := top - 10
			if b.tick > 0 {
				ty := yOf(b.tick)
				vline(img, bx+bw/2, ty, top, black)
				hline(img, bx+2, bx+bw-2, ty, black)
				hline(img, bx+2, bx+bw-2, ty+1, black)
				labY = min(labY, ty-10)
			}
			lab := compact(b.v)
			lc := color.Color(black)
			if b.errs > 0 {
				lab, lc = "ERR", errRed
			}
			drawText(img, bx+(bw-textWidth(lab, 1))/2, max(py0-9, labY), lab, 1, lc)
		}
	}
}

// axisLabel writes a power of ten short: 0.01, 0.1, 1, 10, 100, 1K, 10K.
func axisLabel(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gK", v/1e3)
	default:
		return fmt.Sprintf("%g", v)
	}
}

// compact writes a value in at most five characters.
func compact(v float64) string {
	switch {
	case v >= 1e5:
		return fmt.Sprintf("%.0fK", v/1e3)
	case v >= 1e4:
		return fmt.Sprintf("%.1fK", v/1e3)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func fillRect(img *image.RGBA, x, y, w, h int, c color.Color) {
	if w <= 0 || h <= 0 {
		return
	}
	draw.Draw(img, image.Rect(x, y, x+w, y+h), &image.Uniform{c}, image.Point{}, draw.Src)
}

func strokeRect(img *image.RGBA, x, y, w, h int, c color.Color) {
	hline(img, x, x+w, y, c)
	hline(img, x, x+w, y+h, c)
	vline(img, x, y, y+h, c)
	vline(img, x+w, y, y+h, c)
}

func hline(img *image.RGBA, x0, x1, y int, c color.Color) {
	for x := x0; x <= x1; x++ {
		img.Set(x, y, c)
	}
}

func vline(img *image.RGBA, x, y0, y1 int, c color.Color) {
	if y0 > y1 {
		y0, y1 = y1, y0
	}
	for y := y0; y <= y1; y++ {
		img.Set(x, y, c)
	}
}
