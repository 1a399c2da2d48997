package tools_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/tools"
)

func TestSanitizeInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"plain", "print(1)", "print(1)"},
		{"surrounding whitespace", "  \n\tprint(1)\n\n  ", "print(1)"},
		{"fence python", "```python\nprint(1)\n```", "print(1)"},
		{"fence py", "```py\nprint(1)\n```", "print(1)"},
		{"fence bare", "```\nprint(1)\n```", "print(1)"},
		{"fence Python any case", "```Python\nx = 1\nx\n```", "x = 1\nx"},
		{"fence with spaces and CRLF", "  ```python \r\nprint(1)\r\n```\r\n", "print(1)"},
		{"fence without closing", "```python\nprint(1)", "print(1)"},
		{"closing fence glued to code", "```python\nprint(1)```", "print(1)"},
		{"fence then tag line", "```\npython\nprint(1)\n```", "print(1)"},
		{"fence then py tag line", "```\npy\nprint(1)\n```", "print(1)"},
		{"tag line alone first", "python\nprint(1)", "print(1)"},
		{"tag line py alone first", "py\nimport os\nos.getcwd()", "import os\nos.getcwd()"},
		{"tag line with CR", "python\r\nprint(1)", "print(1)"},
		{"only a tag", "python", ""},
		{"only a fence", "```", ""},
		{"empty", "", ""},
		{"fence keeps inner blank lines and indentation", "```python\nif True:\n\n    print(1)\n```", "if True:\n\n    print(1)"},
		// byte-identical cases
		{"python_var stays", "python_var = 1\nprint(python_var)", "python_var = 1\nprint(python_var)"},
		{"python3 -c first line stays", "python3 -c 'print(1)'", "python3 -c 'print(1)'"},
		{"python call stays", "python = 3\npython", "python = 3\npython"},
		{"pyplot stays", "py = 2\nimport matplotlib.pyplot as plt", "py = 2\nimport matplotlib.pyplot as plt"},
		{"backticks inside a string stay", "s = \"```python\\nx\\n```\"\nprint(s)", "s = \"```python\\nx\\n```\"\nprint(s)"},
		{"triple-quoted fence stays", "s = '''\n```python\nprint(1)\n```\n'''\nprint(s)", "s = '''\n```python\nprint(1)\n```\n'''\nprint(s)"},
		{"fence with other language is not stripped", "```bash\nls\n```", "```bash\nls\n```"},
		{"tag line only on first line", "x = 1\npython\n", "x = 1\npython"},
		{"fence with tag keeps a second tag line", "```python\npython\n```", "python"},
		{"tabs and unicode untouched", "s = 'é\t€'\nprint(s)", "s = 'é\t€'\nprint(s)"},
		{"seed code", "import pandas as pd\n\ndf = pd.read_csv('/mnt/data/TemperatureData.csv')\ndf_sorted = df.sort_values(by='Temperature', ascending=False)", "import pandas as pd\n\ndf = pd.read_csv('/mnt/data/TemperatureData.csv')\ndf_sorted = df.sort_values(by='Temperature', ascending=False)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, tools.SanitizeInput(tt.in))
		})
	}
}
