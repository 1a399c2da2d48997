package tools

import "strings"

// SanitizeInput cleans code written by a model before it is run:
//
//   - surrounding whitespace is removed;
//   - a Markdown code fence around the whole input is removed: an opening
//     line "```", "```python" or "```py" (any case) and, when present, the
//     closing "```" at the very end (on its own line or glued to the last
//     line, which is never valid Python);
//   - a language tag line, "python" or "py" alone on a line (any case), is
//     removed when it directly follows the opening fence or is the first line
//     of the input.
//
// Everything else is returned byte for byte: "python_var = 1" stays, a first
// line "python3 -c ..." stays, and code with ``` inside a string stays,
// because only a fence that opens the input is taken for one.
func SanitizeInput(code string) string {
	s := strings.TrimSpace(code)
	first, rest, hasRest := strings.Cut(s, "\n")
	if tag, ok := strings.CutPrefix(trimLine(first), "```"); ok && (tag == "" || isLanguageTag(tag)) {
		// the closing fence, on its own line or glued to the last line of code
		// (never valid Python, so nothing is lost)
		body := strings.TrimSuffix(strings.TrimSpace(rest), "```")
		s = strings.TrimSpace(body)
		if tag != "" {
			return s // the tag was on the fence line
		}
		first, rest, hasRest = strings.Cut(s, "\n")
	}
	if isLanguageTag(trimLine(first)) {
		if !hasRest {
			return ""
		}
		return strings.TrimSpace(rest)
	}
	return s
}

// trimLine removes a trailing carriage return and surrounding blanks.
func trimLine(l string) string { return strings.Trim(l, " \t\r") }

func isLanguageTag(s string) bool {
	return strings.EqualFold(s, "python") || strings.EqualFold(s, "py")
}
