package output

import "fmt"

// Format is the form of the records eaddr writes.
type Format uint8

const (
	// JSON: one JSON object per line, for log pipelines and scripts
	// (docs/events.md). The zero value.
	JSON Format = iota
	// Text: a few lines per record for a person at a terminal (Human).
	Text
	// Table: one aligned row per record with its client, cause and fix
	// under it (Human.AppendRow).
	Table
)

// String is the format's name as --output takes it.
func (f Format) String() string {
	switch f {
	case JSON:
		return "json"
	case Text:
		return "text"
	case Table:
		return "table"
	}
	return fmt.Sprintf("unknown:%d", uint8(f))
}

// ParseFormat reads a --output value among the ones a command offers.
func ParseFormat(s string, offered ...Format) (Format, error) {
	for _, f := range offered {
		if s == f.String() {
			return f, nil
		}
	}
	return 0, fmt.Errorf("%q is not one of %s", s, formatList(offered))
}

func formatList(fs []Format) string {
	s := ""
	for i, f := range fs {
		switch {
		case i == 0:
		case i == len(fs)-1:
			s += " or "
		default:
			s += ", "
		}
		s += f.String()
	}
	return s
}
