package output

import "github.com/eaddr/eaddr/explain"

// appendStringArray appends list as a JSON array of strings.
func appendStringArray(b []byte, list []string) []byte {
	b = append(b, '[')
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, s)
	}
	return append(b, ']')
}

// appendWordingArray appends list as a JSON array of {"by","text"} objects.
func appendWordingArray(b []byte, list []explain.Wording) []byte {
	b = append(b, '[')
	for i, w := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"by":`...)
		b = appendBytesString(b, w.By)
		b = append(b, `,"text":`...)
		b = appendBytesString(b, w.Text)
		b = append(b, '}')
	}
	return append(b, ']')
}
