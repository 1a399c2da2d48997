// Package uuid makes random UUIDs (version 4, RFC 9562) for session
// identifiers, operation-ids and etags.
package uuid

import (
	"crypto/rand"
	"encoding/hex"
)

// New returns a random UUID version 4 in its canonical text form, from
// crypto/rand.
func New() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand documents it)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:16])
	return string(out[:])
}
