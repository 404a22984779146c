package docs

import (
	"html"
	"html/template"
	"regexp"
	"strings"
)

var blankLine = regexp.MustCompile(`\n[ \t]*\n`)

// prose renders a description: paragraphs split by blank lines, "- " or
// "* " lines as a list, and `code` spans. Every piece of the text is escaped
// before any markup is added, so the result is safe to embed as HTML.
func prose(s string) template.HTML {
	s = strings.TrimSpace(strings.ReplaceAll(s, "\r\n", "\n"))
	if s == "" {
		return ""
	}
	var b strings.Builder
	for _, para := range blankLine.Split(s, -1) {
		para = strings.TrimSpace(para)
		if para == "" {
			continue
		}
		lines := strings.Split(para, "\n")
		if isList(lines) {
			b.WriteString("<ul>")
			for _, item := range listItems(lines) {
				b.WriteString("<li>")
				b.WriteString(inline(item))
				b.WriteString("</li>")
			}
			b.WriteString("</ul>")
			continue
		}
		for i := range lines {
			lines[i] = strings.TrimSpace(lines[i])
		}
		b.WriteString("<p>")
		b.WriteString(inline(strings.Join(lines, " ")))
		b.WriteString("</p>")
	}
	return template.HTML(b.String())
}

func bullet(line string) (string, bool) {
	t := strings.TrimSpace(line)
	for _, p := range []string{"- ", "* "} {
		if rest, ok := strings.CutPrefix(t, p); ok {
			return rest, true
		}
	}
	return t, false
}

func isList(lines []string) bool {
	_, ok := bullet(lines[0])
	return ok
}

// listItems groups lines into items; a line without a bullet continues the
// previous item.
func listItems(lines []string) []string {
	var items []string
	for _, l := range lines {
		text, ok := bullet(l)
		if ok || len(items) == 0 {
			items = append(items, text)
			continue
		}
		items[len(items)-1] += " " + text
	}
	return items
}

// inline escapes text and turns `spans` into <code> elements.
func inline(s string) string {
	parts := strings.Split(s, "`")
	if len(parts)%2 == 0 { // an unmatched backtick stays text
		parts[len(parts)-2] += "`" + parts[len(parts)-1]
		parts = parts[:len(parts)-1]
	}
	var b strings.Builder
	for i, p := range parts {
		if i%2 == 1 {
			b.WriteString("<code>")
			b.WriteString(html.EscapeString(p))
			b.WriteString("</code>")
			continue
		}
		b.WriteString(html.EscapeString(p))
	}
	return b.String()
}
