package otelcol

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Record is one log record the collector handed on, its values typed as
// OTLP typed them: string, bool, int64, float64, []byte, []any and
// map[string]any (nil for an empty value).
type Record struct {
	Resource       map[string]any
	Attributes     map[string]any
	Body           any
	Time, Observed time.Time
	SeverityNumber int
	SeverityText   string
}

// The OTLP JSON encoding (the file exporter's format "json"): one
// ExportLogsServiceRequest a line.
type otlpRequest struct {
	ResourceLogs []struct {
		Resource struct {
			Attributes []otlpKV `json:"attributes"`
		} `json:"resource"`
		ScopeLogs []struct {
			LogRecords []otlpRecord `json:"logRecords"`
		} `json:"scopeLogs"`
	} `json:"resourceLogs"`
}

type otlpRecord struct {
	TimeUnixNano         string    `json:"timeUnixNano"`
	ObservedTimeUnixNano string    `json:"observedTimeUnixNano"`
	SeverityNumber       int       `json:"severityNumber"`
	SeverityText         string    `json:"severityText"`
	Body                 otlpValue `json:"body"`
	Attributes           []otlpKV  `json:"attributes"`
}

type otlpKV struct {
	Key   string    `json:"key"`
	Value otlpValue `json:"value"`
}

// otlpValue is an AnyValue: exactly one field is set (none for an empty
// value). int64 is a JSON string in OTLP JSON, and a number is accepted
// too.
type otlpValue struct {
	StringValue *string          `json:"stringValue"`
	BoolValue   *bool            `json:"boolValue"`
	IntValue    *json.RawMessage `json:"intValue"`
	DoubleValue *float64         `json:"doubleValue"`
	BytesValue  *[]byte          `json:"bytesValue"`
	ArrayValue  *struct {
		Values []otlpValue `json:"values"`
	} `json:"arrayValue"`
	KvlistValue *struct {
		Values []otlpKV `json:"values"`
	} `json:"kvlistValue"`
}

// typed returns v as a Go value.
func (v otlpValue) typed() (any, error) {
	switch {
	case v.StringValue != nil:
		return *v.StringValue, nil
	case v.BoolValue != nil:
		return *v.BoolValue, nil
	case v.IntValue != nil:
		s := strings.Trim(string(*v.IntValue), `"`)
		return strconv.ParseInt(s, 10, 64)
	case v.DoubleValue != nil:
		return *v.DoubleValue, nil
	case v.BytesValue != nil:
		return *v.BytesValue, nil
	case v.ArrayValue != nil:
		out := []any{}
		for _, e := range v.ArrayValue.Values {
			x, err := e.typed()
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	case v.KvlistValue != nil:
		return kvMap(v.KvlistValue.Values)
	}
	return nil, nil
}

func kvMap(kvs []otlpKV) (map[string]any, error) {
	m := map[string]any{}
	for _, kv := range kvs {
		if _, dup := m[kv.Key]; dup {
			return nil, fmt.Errorf("key %q twice", kv.Key)
		}
		x, err := kv.Value.typed()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kv.Key, err)
		}
		m[kv.Key] = x
	}
	return m, nil
}

// ReadOTLP reads the records of an OTLP JSON file, in the order written.
// A last line not yet complete (the exporter is writing it) is left out.
func ReadOTLP(path string) ([]Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		data = nil
	}
	var out []Record
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for n := 1; sc.Scan(); n++ {
		var req otlpRequest
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		for _, rl := range req.ResourceLogs {
			res, err := kvMap(rl.Resource.Attributes)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: resource: %w", path, n, err)
			}
			for _, sl := range rl.ScopeLogs {
				for _, lr := range sl.LogRecords {
					r, err := lr.record(res)
					if err != nil {
						return nil, fmt.Errorf("%s:%d: %w", path, n, err)
					}
					out = append(out, r)
				}
			}
		}
	}
	return out, sc.Err()
}

func (lr otlpRecord) record(res map[string]any) (Record, error) {
	r := Record{Resource: res, SeverityNumber: lr.SeverityNumber, SeverityText: lr.SeverityText}
	var err error
	if r.Attributes, err = kvMap(lr.Attributes); err != nil {
		return r, err
	}
	if r.Body, err = lr.Body.typed(); err != nil {
		return r, err
	}
	if r.Time, err = unixNano(lr.TimeUnixNano); err != nil {
		return r, err
	}
	r.Observed, err = unixNano(lr.ObservedTimeUnixNano)
	return r, err
}

func unixNano(s string) (time.Time, error) {
	if s == "" || s == "0" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q: %w", s, err)
	}
	return time.Unix(0, n).UTC(), nil
}
