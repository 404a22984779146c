package main

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/stepgraph/stepgraph/bench/internal/growth"
)

// chart draws the growing conversation as an SVG: bytes written per turn
// (all tables, and checkpoints with their blobs) and latency per turn,
// against the turn number, one colour per durability. Hand-written SVG:
// no dependency for two line plots.
func chart(all []Series) []byte {
	const w, h, pad = 480, 300, 50
	colors := map[string]string{"sync": "#0072b2", "async": "#e69f00"}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", 2*w, h+30)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	panel := func(x0 int, title, unit string, lines []line) {
		// The y axis ends at 1.5× the 95th percentile: a few turns slowed
		// by a loaded machine are clipped at the top, not the scale.
		maxX := 1.0
		var ys []float64
		for _, l := range lines {
			for _, p := range l.pts {
				maxX = math.Max(maxX, p[0])
				ys = append(ys, p[1])
			}
		}
		sort.Float64s(ys)
		maxY := 0.0
		if len(ys) > 0 {
			maxY = math.Min(ys[len(ys)-1], 1.5*ys[len(ys)*95/100])
		}
		maxY = niceCeil(maxY)
		px := func(x float64) float64 { return float64(x0+pad) + x/maxX*float64(w-pad-20) }
		py := func(y float64) float64 { return float64(h-pad) - math.Min(y, maxY)/maxY*float64(h-2*pad) + 20 }
		fmt.Fprintf(&b, `<text x="%d" y="18" font-size="13">%s</text>`+"\n", x0+pad, title)
		for i := 0; i <= 4; i++ {
			y := maxY * float64(i) / 4
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%.3g</text>`+"\n",
				px(0), py(y), px(maxX), py(y), x0+pad-4, py(y)+4, y)
		}
		for i := 0; i <= 4; i++ {
			x := maxX * float64(i) / 4
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%.0f</text>`+"\n", px(x), h-pad+36, x)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d">turn</text><text x="%d" y="32">%s</text>`+"\n", x0+w-60, h-pad+36, x0+4, unit)
		for i, l := range lines {
			var pts []string
			for _, p := range l.pts {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p[0]), py(p[1])))
			}
			dash := ""
			if l.dashed {
				dash = ` stroke-dasharray="4 3"`
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5"%s points="%s"/>`+"\n", l.color, dash, strings.Join(pts, " "))
			fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/><text x="%d" y="%d">%s</text>`+"\n",
				x0+pad+10, 44+14*i, x0+pad+30, 44+14*i, l.color, dash, x0+pad+34, 48+14*i, l.label)
		}
	}
	var bytesLines, latLines []line
	for _, s := range all {
		if s.Workload != growth.Conversation {
			continue
		}
		var all, cps, lat, cpu [][2]float64
		for _, p := range s.Points {
			all = append(all, [2]float64{float64(p.N), float64(p.Bytes) / 1024})
			cps = append(cps, [2]float64{float64(p.N), float64(growth.CheckpointBytes(p)) / 1024})
			lat = append(lat, [2]float64{float64(p.N), p.LatencyMS})
			cpu = append(cpu, [2]float64{float64(p.N), p.CPUMS})
		}
		c := colors[s.Durability]
		bytesLines = append(bytesLines, line{s.Durability + ": all writes", c, false, all}, line{s.Durability + ": checkpoints and blobs", c, true, cps})
		latLines = append(latLines, line{s.Durability + ": latency", c, false, lat}, line{s.Durability + ": CPU time of the process", c, true, cpu})
	}
	panel(0, "Growing conversation: bytes written per turn", "KB", bytesLines)
	panel(w, "Growing conversation: latency and CPU per turn (runs/wait)", "ms", latLines)
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

type line struct {
	label, color string
	dashed       bool
	pts          [][2]float64
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
