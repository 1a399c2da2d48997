package azsessionstest

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/azsessions/azsessions/emulator"
)

// DefaultExecutor returns the executor a Server uses when Options.Executor
// is nil: a scripted executor that understands a tiny subset of Python, so
// that simple tests need no interpreter. Per line it runs:
//
//   - an expression of int, float and str literals, True, False, None, names,
//     parentheses and + - * / // % ** (e.g. 6 * 7, "a" + "b");
//   - name = expression (variables persist in the session, like a kernel's);
//   - print(expr, ...) which writes str() of the values and a newline to stdout;
//   - raise Name or raise Name("message"), which fails the execution with a
//     traceback in stderr ("Name: message");
//   - time.sleep(seconds), which honours the execution timeout;
//   - import lines, comments and blank lines, which do nothing.
//
// The value of a last line that is an expression is the result (42 for
// "6 * 7"; "" when there is none). Anything else fails the execution with a
// NotImplementedError in stderr: use emulator.ScriptedExecutor for custom
// behaviour or emulator.NewSandboxExecutor for real Python.
func DefaultExecutor() emulator.Executor {
	t := &tiny{vars: map[string]map[string]any{}}
	return emulator.ScriptedExecutor(t.run)
}

type tiny struct {
	mu   sync.Mutex
	vars map[string]map[string]any // by data directory (one per kernel)
}

type pyError struct{ name, msg string }

func (e *pyError) Error() string { return e.name + ": " + e.msg }

func (t *tiny) run(ctx context.Context, code string) emulator.ExecutionResult {
	key := emulator.DataDirFromContext(ctx)
	t.mu.Lock()
	vars := t.vars[key]
	if vars == nil {
		vars = map[string]any{}
		t.vars[key] = vars
	}
	t.mu.Unlock()
	var res emulator.ExecutionResult
	var out strings.Builder
	lines := strings.Split(strings.ReplaceAll(code, "\r\n", "\n"), "\n")
	for i, raw := range lines {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "import ") || strings.HasPrefix(line, "from ") {
			continue
		}
		last := true
		for _, rest := range lines[i+1:] {
			if r := strings.TrimSpace(rest); r != "" && !strings.HasPrefix(r, "#") {
				last = false
			}
		}
		t.mu.Lock()
		v, isExpr, err := t.statement(ctx, line, vars, &out)
		t.mu.Unlock()
		if err != nil {
			pe, ok := err.(*pyError)
			if !ok {
				pe = &pyError{"RuntimeError", err.Error()}
			}
			res.Status = emulator.Failed
			res.Stderr = fmt.Sprintf("Traceback (most recent call last):\n  Cell In[1], line %d\n    %s\n%s: %s\n", i+1, line, pe.name, pe.msg)
			res.Value = json.RawMessage(`""`)
			break
		}
		if last && isExpr {
			b, _ := json.Marshal(jsonValue(v))
			res.Value = b
		}
	}
	res.Stdout = out.String()
	return res
}

func jsonValue(v any) any {
	if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return pyStr(f)
	}
	return v
}

func (t *tiny) statement(ctx context.Context, line string, vars map[string]any, out *strings.Builder) (any, bool, error) {
	switch {
	case strings.HasPrefix(line, "raise "):
		rest := strings.TrimSpace(line[len("raise "):])
		name, arg, _ := strings.Cut(rest, "(")
		msg := ""
		if arg = strings.TrimSuffix(arg, ")"); strings.TrimSpace(arg) != "" {
			v, err := eval(arg, vars)
			if err != nil {
				return nil, false, err
			}
			msg = pyStr(v)
		}
		return nil, false, &pyError{strings.TrimSpace(name), msg}
	case strings.HasPrefix(line, "print(") && strings.HasSuffix(line, ")"):
		args := strings.TrimSpace(line[len("print(") : len(line)-1])
		var parts []string
		if args != "" {
			for _, a := range splitArgs(args) {
				v, err := eval(a, vars)
				if err != nil {
					return nil, false, err
				}
				parts = append(parts, pyStr(v))
			}
		}
		out.WriteString(strings.Join(parts, " ") + "\n")
		return nil, false, nil
	case strings.HasPrefix(line, "time.sleep(") && strings.HasSuffix(line, ")"):
		v, err := eval(line[len("time.sleep("):len(line)-1], vars)
		if err != nil {
			return nil, false, err
		}
		f, ok := toFloat(v)
		if !ok {
			return nil, false, &pyError{"TypeError", "time.sleep needs a number"}
		}
		timer := time.NewTimer(time.Duration(f * float64(time.Second)))
		defer timer.Stop()
		t.mu.Unlock() // do not block other kernels while sleeping
		defer t.mu.Lock()
		select {
		case <-timer.C:
		case <-ctx.Done():
			return nil, false, &pyError{"TimeoutError", "the execution timed out"}
		}
		return nil, false, nil
	}
	if name, expr, ok := strings.Cut(line, "="); ok && isIdent(strings.TrimSpace(name)) && !strings.HasPrefix(expr, "=") {
		v, err := eval(expr, vars)
		if err != nil {
			return nil, false, err
		}
		vars[strings.TrimSpace(name)] = v
		return nil, false, nil
	}
	v, err := eval(line, vars)
	return v, err == nil, err
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || unicode.IsLetter(r) || (i > 0 && unicode.IsDigit(r))) {
			return false
		}
	}
	return true
}

// splitArgs splits a call's arguments at top-level commas.
func splitArgs(s string) []string {
	var out []string
	depth, start := 0, 0
	var quote rune
	for i, r := range s {
		switch {
		case quote != 0:
			if r == quote && (i == 0 || s[i-1] != '\\') {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '(':
			depth++
		case r == ')':
			depth--
		case r == ',' && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// pyStr is Python's str() of a value.
func pyStr(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		switch {
		case math.IsNaN(x):
			return "nan"
		case math.IsInf(x, 1):
			return "inf"
		case math.IsInf(x, -1):
			return "-inf"
		}
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if !strings.ContainsAny(s, ".e") {
			s += ".0"
		}
		return s
	case string:
		return x
	}
	return fmt.Sprint(v)
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// eval evaluates an arithmetic expression.
func eval(src string, vars map[string]any) (any, error) {
	p := &parser{toks: nil, vars: vars}
	if err := p.lex(src); err != nil {
		return nil, err
	}
	v, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.pos != len(p.toks) {
		return nil, unsupported()
	}
	return v, nil
}

func unsupported() error {
	return &pyError{"NotImplementedError", "the azsessionstest default executor runs only a tiny Python subset (see azsessionstest.DefaultExecutor); set Options.Executor to emulator.ScriptedExecutor or emulator.NewSandboxExecutor"}
}

type token struct {
	kind string // num, str, name, op
	text string
	val  any
}

type parser struct {
	toks []token
	pos  int
	vars map[string]any
}

func (p *parser) lex(s string) error {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			j := i
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.' || s[j] == '_' || s[j] == 'e' || s[j] == 'E' || (s[j] == '-' || s[j] == '+') && (s[j-1] == 'e' || s[j-1] == 'E')) {
				j++
			}
			text := strings.ReplaceAll(s[i:j], "_", "")
			if n, err := strconv.ParseInt(text, 10, 64); err == nil {
				p.toks = append(p.toks, token{kind: "num", val: n})
			} else if f, err := strconv.ParseFloat(text, 64); err == nil {
				p.toks = append(p.toks, token{kind: "num", val: f})
			} else {
				return &pyError{"SyntaxError", "invalid number"}
			}
			i = j
		case c == '\'' || c == '"':
			var b strings.Builder
			j := i + 1
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
					switch s[j] {
					case 'n':
						b.WriteByte('\n')
					case 't':
						b.WriteByte('\t')
					default:
						b.WriteByte(s[j])
					}
					continue
				}
				b.WriteByte(s[j])
			}
			if j >= len(s) {
				return &pyError{"SyntaxError", "unterminated string literal"}
			}
			p.toks = append(p.toks, token{kind: "str", val: b.String()})
			i = j + 1
		case c == '_' || unicode.IsLetter(rune(c)):
			j := i
			for j < len(s) && (s[j] == '_' || unicode.IsLetter(rune(s[j])) || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			p.toks = append(p.toks, token{kind: "name", text: s[i:j]})
			i = j
		default:
			for _, op := range []string{"**", "//", "+", "-", "*", "/", "%", "(", ")"} {
				if strings.HasPrefix(s[i:], op) {
					p.toks = append(p.toks, token{kind: "op", text: op})
					i += len(op)
					goto next
				}
			}
			return unsupported()
		next:
		}
	}
	return nil
}

func (p *parser) peekOp(ops ...string) string {
	if p.pos < len(p.toks) && p.toks[p.pos].kind == "op" {
		for _, o := range ops {
			if p.toks[p.pos].text == o {
				return o
			}
		}
	}
	return ""
}

func (p *parser) expr() (any, error) {
	v, err := p.term()
	for err == nil {
		op := p.peekOp("+", "-")
		if op == "" {
			break
		}
		p.pos++
		var r any
		if r, err = p.term(); err == nil {
			v, err = binary(op, v, r)
		}
	}
	return v, err
}

func (p *parser) term() (any, error) {
	v, err := p.unary()
	for err == nil {
		op := p.peekOp("*", "/", "//", "%")
		if op == "" {
			break
		}
		p.pos++
		var r any
		if r, err = p.unary(); err == nil {
			v, err = binary(op, v, r)
		}
	}
	return v, err
}

func (p *parser) unary() (any, error) {
	if op := p.peekOp("-", "+"); op != "" {
		p.pos++
		v, err := p.unary()
		if err != nil {
			return nil, err
		}
		if op == "-" {
			return binary("*", int64(-1), v)
		}
		return v, nil
	}
	return p.power()
}

func (p *parser) power() (any, error) {
	v, err := p.atom()
	if err == nil && p.peekOp("**") != "" {
		p.pos++
		var r any
		if r, err = p.unary(); err == nil {
			v, err = binary("**", v, r)
		}
	}
	return v, err
}

func (p *parser) atom() (any, error) {
	if p.pos >= len(p.toks) {
		return nil, &pyError{"SyntaxError", "invalid syntax"}
	}
	t := p.toks[p.pos]
	p.pos++
	switch t.kind {
	case "num", "str":
		return t.val, nil
	case "name":
		switch t.text {
		case "True":
			return true, nil
		case "False":
			return false, nil
		case "None":
			return nil, nil
		}
		if v, ok := p.vars[t.text]; ok {
			return v, nil
		}
		return nil, &pyError{"NameError", fmt.Sprintf("name '%s' is not defined", t.text)}
	case "op":
		if t.text == "(" {
			v, err := p.expr()
			if err != nil {
				return nil, err
			}
			if p.peekOp(")") == "" {
				return nil, &pyError{"SyntaxError", "'(' was never closed"}
			}
			p.pos++
			return v, nil
		}
	}
	return nil, unsupported()
}

func binary(op string, a, b any) (any, error) {
	if sa, ok := a.(string); ok {
		if sb, ok := b.(string); ok && op == "+" {
			return sa + sb, nil
		}
		if n, ok := b.(int64); ok && op == "*" {
			return strings.Repeat(sa, int(max(n, 0))), nil
		}
		return nil, &pyError{"TypeError", fmt.Sprintf("unsupported operand type(s) for %s", op)}
	}
	ia, aInt := a.(int64)
	ib, bInt := b.(int64)
	if _, ok := a.(bool); ok {
		ia, aInt = int64(boolInt(a.(bool))), true
	}
	if _, ok := b.(bool); ok {
		ib, bInt = int64(boolInt(b.(bool))), true
	}
	if aInt && bInt {
		switch op {
		case "+":
			return ia + ib, nil
		case "-":
			return ia - ib, nil
		case "*":
			return ia * ib, nil
		case "//", "%":
			if ib == 0 {
				return nil, &pyError{"ZeroDivisionError", "integer division or modulo by zero"}
			}
			q, m := ia/ib, ia%ib
			if m != 0 && (m < 0) != (ib < 0) {
				q, m = q-1, m+ib
			}
			if op == "//" {
				return q, nil
			}
			return m, nil
		case "**":
			if ib >= 0 {
				r := int64(1)
				for range ib {
					r *= ia
				}
				return r, nil
			}
		}
	}
	fa, ok1 := toFloat(a)
	fb, ok2 := toFloat(b)
	if !ok1 || !ok2 {
		return nil, &pyError{"TypeError", fmt.Sprintf("unsupported operand type(s) for %s", op)}
	}
	switch op {
	case "+":
		return fa + fb, nil
	case "-":
		return fa - fb, nil
	case "*":
		return fa * fb, nil
	case "/":
		if fb == 0 {
			return nil, &pyError{"ZeroDivisionError", "division by zero"}
		}
		return fa / fb, nil
	case "//":
		if fb == 0 {
			return nil, &pyError{"ZeroDivisionError", "float floor division by zero"}
		}
		return math.Floor(fa / fb), nil
	case "%":
		if fb == 0 {
			return nil, &pyError{"ZeroDivisionError", "float modulo"}
		}
		return fa - fb*math.Floor(fa/fb), nil
	case "**":
		return math.Pow(fa, fb), nil
	}
	return nil, unsupported()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
