package config

import (
	"bytes"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// fileValue is one value the file gives a setting, with where it stands.
type fileValue struct {
	key  string
	line int
	text string
}

// Strings is implemented by a repeatable setting's value: the file takes
// it as a list and the printed configuration shows it as one.
type Strings interface{ Strings() []string }

// KeyValues is implemented by a repeatable setting whose value is a list
// of key=value pairs, comma-separated ("name=base,node=URL,node=URL"): in
// the file each value may be a mapping instead, its keys those of the pairs
// and a list standing for a key repeated.
type KeyValues interface{ KeyValues() }

// keyValueText writes a mapping as the key=value text a KeyValues setting
// parses.
func keyValueText(m *yaml.Node) (string, error) {
	var parts []string
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		switch v.Kind {
		case yaml.ScalarNode:
			parts = append(parts, k.Value+"="+v.Value)
		case yaml.SequenceNode:
			for _, item := range v.Content {
				if item.Kind != yaml.ScalarNode {
					return "", fmt.Errorf("%s: want a value or a list of values", k.Value)
				}
				parts = append(parts, k.Value+"="+item.Value)
			}
		default:
			return "", fmt.Errorf("%s: want a value or a list of values", k.Value)
		}
	}
	return strings.Join(parts, ","), nil
}

// readFile reads the YAML file at path: a mapping of sections (mappings of
// keys) and top-level keys. A key that is no setting is an error naming the
// key and its line; a list is a repeatable setting's values, one by one.
func (r *Registry) readFile(path string) (map[*Setting][]fileValue, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("configuration file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("configuration file %s: %w", path, err)
	}
	out := map[*Setting][]fileValue{}
	if len(doc.Content) == 0 {
		return out, nil // an empty file
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: want a mapping of sections and settings", path, root.Line)
	}
	sections := map[string]bool{}
	for _, s := range r.settings {
		if s.Section != "" {
			sections[s.Section] = true
		}
	}
	var walk func(section string, m *yaml.Node) error
	walk = func(section string, m *yaml.Node) error {
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			full := k.Value
			if section != "" {
				full = section + "." + k.Value
			}
			if section == "" && sections[k.Value] {
				if v.Kind != yaml.MappingNode {
					return fmt.Errorf("%s:%d: %s: want a mapping of its settings", path, v.Line, full)
				}
				if err := walk(k.Value, v); err != nil {
					return err
				}
				continue
			}
			s := r.setting(section, k.Value)
			if s == nil {
				return fmt.Errorf("%s:%d: unknown setting %s", path, k.Line, full)
			}
			switch v.Kind {
			case yaml.ScalarNode:
				out[s] = append(out[s], fileValue{key: full, line: v.Line, text: v.Value})
			case yaml.SequenceNode:
				for _, item := range v.Content {
					if _, ok := s.Value.(KeyValues); ok && item.Kind == yaml.MappingNode {
						text, err := keyValueText(item)
						if err != nil {
							return fmt.Errorf("%s:%d: %s: %w", path, item.Line, full, err)
						}
						out[s] = append(out[s], fileValue{key: full, line: item.Line, text: text})
						continue
					}
					if item.Kind != yaml.ScalarNode {
						return fmt.Errorf("%s:%d: %s: want a list of values", path, item.Line, full)
					}
					out[s] = append(out[s], fileValue{key: full, line: item.Line, text: item.Value})
				}
			default:
				return fmt.Errorf("%s:%d: %s: want a value or a list of values", path, v.Line, full)
			}
		}
		return nil
	}
	if err := walk("", root); err != nil {
		return nil, err
	}
	return out, nil
}

func (r *Registry) setting(section, key string) *Setting {
	for _, s := range r.settings {
		if s.Section == section && s.Key == key {
			return s
		}
	}
	return nil
}

// WriteYAML writes the effective value of every setting as a configuration
// file, secrets redacted.
func (r *Registry) WriteYAML(w io.Writer) error {
	root := &yaml.Node{Kind: yaml.MappingNode}
	sections := map[string]*yaml.Node{}
	for _, s := range r.settings {
		m := root
		if s.Section != "" {
			if sections[s.Section] == nil {
				sections[s.Section] = &yaml.Node{Kind: yaml.MappingNode}
				root.Content = append(root.Content, scalar(s.Section), sections[s.Section])
			}
			m = sections[s.Section]
		}
		var v *yaml.Node
		if l, ok := s.Value.(Strings); ok {
			v = &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
			for _, x := range l.Strings() {
				v.Content = append(v.Content, scalar(redact(s.Secret, x)))
			}
		} else {
			v = scalar(redact(s.Secret, s.Value.String()))
		}
		m.Content = append(m.Content, scalar(s.Key), v)
	}
	// Top-level settings first, then the sections.
	var top, secs []*yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i+1].Kind == yaml.MappingNode {
			secs = append(secs, root.Content[i], root.Content[i+1])
		} else {
			top = append(top, root.Content[i], root.Content[i+1])
		}
	}
	root.Content = append(top, secs...)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

func scalar(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }

// redact hides a secret: a URL's password, or the whole value.
func redact(secret, v string) string {
	switch {
	case v == "" || secret == "":
		return v
	case secret == "url":
		if u, err := url.Parse(v); err == nil && u.User != nil {
			return u.Redacted()
		}
		return v
	}
	return "REDACTED"
}

// JoinKeyValues is the text of a KeyValues setting of several
// declarations: each one's String, separated by ';'.
func JoinKeyValues[T fmt.Stringer](items []T) string {
	parts := make([]string, len(items))
	for i, d := range items {
		parts[i] = d.String()
	}
	return strings.Join(parts, ";")
}

// AppendKeyValues parses v, one declaration or several separated by ';',
// with parse, and appends them to items (a KeyValues setting's Set).
func AppendKeyValues[T any](items *[]T, v string, parse func(string) (T, error)) error {
	for part := range strings.SplitSeq(v, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		d, err := parse(part)
		if err != nil {
			return err
		}
		*items = append(*items, d)
	}
	return nil
}
