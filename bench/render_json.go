package bench

import (
	"encoding/json"
	"io"
)

// WriteJSON writes r as indented JSON: every figure, as Report's fields
// name them.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
