package kernel

import (
	"testing"

	"github.com/stretchr/testify/require"
)

//lint:file-ignore SA1019 the deprecated name is what is tested.

// TestOutputCap: the output cap comes from Request.OutputStreamsMaxLength or
// its deprecated former name OutputMaxLength, whichever is set; two different
// values are refused.
func TestOutputCap(t *testing.T) {
	tests := []struct {
		name      string
		req       Request
		want      int
		wantError string
	}{
		{"neither", Request{}, DefaultOutputStreamsMaxLength, ""},
		{"new name", Request{OutputStreamsMaxLength: 10}, 10, ""},
		{"old name", Request{OutputMaxLength: 10}, 10, ""},
		{"both equal", Request{OutputStreamsMaxLength: 10, OutputMaxLength: 10}, 10, ""},
		{"both different", Request{OutputStreamsMaxLength: 10, OutputMaxLength: 11}, 0, "differ"},
		{"negative", Request{OutputStreamsMaxLength: -1}, 0, "negative"},
		{"old name negative", Request{OutputMaxLength: -1}, 0, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := OutputCap(tt.req)
			if tt.wantError != "" {
				require.ErrorContains(t, err, tt.wantError)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestTruncateOutput: the cut counts characters, not bytes, and never
// splits one.
func TestTruncateOutput(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
		cut  bool
	}{
		{"", 3, "", false},
		{"abc", 3, "abc", false},
		{"abcd", 3, "abc", true},
		{"ééé€", 2, "éé", true},
		{"€€", 5, "€€", false},
		{"€€", 0, "", true},
	}
	for _, tc := range tests {
		got, cut := TruncateOutput(tc.in, tc.n)
		require.Equal(t, tc.want, got, "%q cut at %d", tc.in, tc.n)
		require.Equal(t, tc.cut, cut, "%q cut at %d", tc.in, tc.n)
	}
}

// TestStatusWord: a kernel outcome is the service's status word as it is;
// the zero value is Succeeded.
func TestStatusWord(t *testing.T) {
	cases := []struct {
		in   Status
		want string
	}{
		{"", "Succeeded"},
		{Succeeded, "Succeeded"},
		{Failed, "Failed"},
		{Canceled, "Canceled"},
	}
	for _, tc := range cases {
		t.Run(string(tc.in), func(t *testing.T) {
			require.Equal(t, tc.want, tc.in.Word())
		})
	}
}
