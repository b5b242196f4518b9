// Package config registers ledgerq's settings as flags, environment
// variables and keys of a YAML configuration file from one declaration per
// setting: a struct tag on the field of the Config that owns it.
//
//	DelayWindow time.Duration `flag:"delay-window" help:"..."`
//
// Tags: flag is the setting's name within its struct; help its one-line
// help; group, on a struct field, reads that struct's settings with the
// given name prefix ("sim-"); value chooses a custom flag.Value ("negated",
// "wei", "wei-none", "wei-positive"); secret ("url", "true") redacts the value
// when the configuration is printed; only names the command part (see
// Options.Parts) without which the setting is not registered; default, when
// the value's default depends on the machine (a count of CPUs), is what the
// documentation shows instead ("16, or the CPUs where more"). A field of a
// type that implements flag.Value (through its pointer) or
// encoding.TextUnmarshaler is set through it; strings, bools, ints, int64,
// uint64, float64 and time.Duration use the flag package's own Values, so a
// setting parses, and prints its default, exactly as the flag package's.
//
// Mapping: a setting belongs to a section (a lane, or a shared part such
// as "api"); its flag is the section's flag prefix and its key, and in the
// file it is the key under the section ("batch:\n  delay-window: 1s" is
// --batch-delay-window); settings of the section "" are top-level keys.
// Its environment variable is given by the caller (ledgerq: LEDGERQ_ and
// the flag in upper snake case).
//
// Why our own and not a library: the flag package's behaviour (parsing,
// bool flags standing alone, errors, -h) is what the commands, their tests
// and operators' scripts rely on, and pflag, koanf and viper each replace
// it or add a second source of truth for names; what is needed on top of
// it (tags, aliases, one file, environment) is small.
package config

import (
	"encoding"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Setting is one declared setting.
type Setting struct {
	// Section is the file's section ("" for a top-level key) and Key the
	// setting's key in it.
	Section, Key string
	// Flag is the flag's name; Aliases are deprecated names that still set
	// it (each warns once).
	Flag    string
	Aliases []string
	// Env are the environment variables that set it, first found wins;
	// AliasEnv those of the aliases.
	Env, AliasEnv []string
	Help          string
	// Secret is how the printed configuration hides the value: "url" hides
	// a URL's password, "true" the whole value.
	Secret string
	// Default is the value's text before parsing; DefaultDoc, when set,
	// what the documentation shows instead (the default depends on the
	// machine).
	Default, DefaultDoc string
	// Value is the flag's value.
	Value flag.Value
}

// Options configure one Struct registration.
type Options struct {
	// Section and Prefix: the settings' section and their flags' prefix
	// ("batch", "batch-").
	Section, Prefix string
	// Alias returns the deprecated flag name of a setting of key, or "".
	Alias func(key string) string
	// Parts are the command parts this command takes: a setting tagged
	// only:"x" is registered only when Parts["x"].
	Parts map[string]bool
}

// Registry holds the settings registered on one FlagSet.
type Registry struct {
	fs       *flag.FlagSet
	env      func(flagName string) []string
	settings []*Setting
	byFlag   map[string]*Setting
	aliasOf  map[string]*Setting

	mu     sync.Mutex
	warned map[string]bool
	notes  []string
}

// New returns a Registry registering on fs, with env giving the
// environment variables of a flag.
func New(fs *flag.FlagSet, env func(flagName string) []string) *Registry {
	return &Registry{fs: fs, env: env, byFlag: map[string]*Setting{}, aliasOf: map[string]*Setting{}, warned: map[string]bool{}}
}

// FlagSet is the FlagSet the settings are registered on.
func (r *Registry) FlagSet() *flag.FlagSet { return r.fs }

// Settings are the registered settings, in registration order.
func (r *Registry) Settings() []*Setting { return r.settings }

// Lookup returns the setting of flag name (or of one of its aliases).
func (r *Registry) Lookup(name string) *Setting {
	if s := r.byFlag[name]; s != nil {
		return s
	}
	return r.aliasOf[name]
}

// Struct registers the tagged fields of the struct ptr points to.
func (r *Registry) Struct(ptr any, o Options) {
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("config: Struct wants a pointer to a struct, got %T", ptr))
	}
	r.walk(v.Elem(), "", o)
}

// tagKeys are the struct tag keys a declaration may use (json and yaml
// belong to other packages and are let through).
var tagKeys = []string{"flag", "help", "group", "value", "secret", "only", "default", "json", "yaml"}

// checkTag refuses a tag key the registrar does not read: a misspelt key
// (cmd: for only:) would otherwise be ignored without a word, and the
// setting registered where it should not be.
func checkTag(tag reflect.StructTag) error {
	for _, m := range tagKeyRE.FindAllStringSubmatch(string(tag), -1) {
		if !slices.Contains(tagKeys, m[1]) {
			return fmt.Errorf("unknown tag key %q (want one of %s)", m[1], strings.Join(tagKeys, ", "))
		}
	}
	return nil
}

// tagKeyRE finds each key:"value" pair of a struct tag (values may hold
// escaped quotes).
var tagKeyRE = regexp.MustCompile(`(?:^|\s)([^\s:"]+):"(?:[^"\\]|\\.)*"`)

func (r *Registry) walk(v reflect.Value, keyPrefix string, o Options) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if err := checkTag(f.Tag); err != nil {
			panic(fmt.Sprintf("config: %s.%s: %v", t, f.Name, err))
		}
		fv := v.Field(i)
		if g, ok := f.Tag.Lookup("group"); ok {
			r.walk(fv, keyPrefix+g, o)
			continue
		}
		name, ok := f.Tag.Lookup("flag")
		if !ok {
			continue
		}
		if only := f.Tag.Get("only"); only != "" && !o.Parts[only] {
			continue
		}
		key := keyPrefix + name
		val := newValue(fv, f.Tag.Get("value"))
		s := &Setting{Section: o.Section, Key: key, Flag: o.Prefix + key, Help: f.Tag.Get("help"), Secret: f.Tag.Get("secret"), DefaultDoc: f.Tag.Get("default"), Value: val}
		if o.Alias != nil {
			if a := o.Alias(key); a != "" && a != s.Flag {
				s.Aliases = append(s.Aliases, a)
			}
		}
		r.add(s)
	}
}

// Adopt declares flags already registered on the FlagSet by hand (a lane
// not yet declared by tags) as settings of section, each keyed by its name
// without prefix where it has it.
func (r *Registry) Adopt(section, prefix string, names ...string) {
	for _, n := range names {
		f := r.fs.Lookup(n)
		if f == nil || r.byFlag[n] != nil {
			continue
		}
		key := n
		if prefix != "" && strings.HasPrefix(n, prefix) {
			key = strings.TrimPrefix(n, prefix)
		}
		s := &Setting{Section: section, Key: key, Flag: n, Help: f.Usage, Default: f.DefValue, Value: f.Value, Env: r.env(n)}
		r.record(s)
	}
}

// AdoptRest declares every flag of the FlagSet not yet a setting as a
// top-level setting keyed by its name (a command's own flags).
func (r *Registry) AdoptRest() {
	var names []string
	r.fs.VisitAll(func(f *flag.Flag) {
		if r.Lookup(f.Name) == nil {
			names = append(names, f.Name)
		}
	})
	r.Adopt("", "", names...)
}

func (r *Registry) add(s *Setting) {
	s.Default = s.Value.String()
	s.Env = r.env(s.Flag)
	r.fs.Var(s.Value, s.Flag, s.Help)
	for _, a := range s.Aliases {
		r.fs.Var(&aliasValue{Value: s.Value, r: r, old: a, new: s.Flag}, a, "deprecated: use --"+s.Flag)
		s.AliasEnv = append(s.AliasEnv, r.env(a)...)
		r.aliasOf[a] = s
	}
	r.record(s)
}

func (r *Registry) record(s *Setting) {
	for _, o := range r.settings {
		if o.Section == s.Section && o.Key == s.Key {
			panic(fmt.Sprintf("config: --%s and --%s have the same key %s.%s", o.Flag, s.Flag, s.Section, s.Key))
		}
	}
	r.settings = append(r.settings, s)
	r.byFlag[s.Flag] = s
}

// IsAlias reports whether name is a deprecated alias.
func (r *Registry) IsAlias(name string) bool { return r.aliasOf[name] != nil }

// deprecated notes, once per name, that old was used for new.
func (r *Registry) deprecated(kind, old, new string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.warned[old] {
		return
	}
	r.warned[old] = true
	r.notes = append(r.notes, fmt.Sprintf("%s %s is deprecated: use %s", kind, old, new))
}

// Deprecations are the notes of the deprecated names used so far, each
// once ("flag --delay-window is deprecated: use --batch-delay-window").
func (r *Registry) Deprecations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.notes)
}

// aliasValue is a deprecated flag name: it sets its setting's value and
// notes the deprecation.
type aliasValue struct {
	flag.Value
	r        *Registry
	old, new string
}

func (a *aliasValue) Set(s string) error {
	a.r.deprecated("flag", "--"+a.old, "--"+a.new)
	return a.Value.Set(s)
}

func (a *aliasValue) IsBoolFlag() bool {
	b, ok := a.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// Parse parses args, then fills every setting not given on the command
// line from its environment variable, else from the configuration file
// (file(), read after the command line, when not empty): defaults < file <
// environment < flags. A repeatable setting takes its values from one
// source only.
func (r *Registry) Parse(args []string, fileName func() string) error {
	if err := r.fs.Parse(args); err != nil {
		return err
	}
	given := map[*Setting]bool{}
	r.fs.Visit(func(f *flag.Flag) {
		if s := r.Lookup(f.Name); s != nil {
			given[s] = true
		}
	})
	var fromFile map[*Setting][]fileValue
	file := fileName()
	if file != "" {
		var err error
		if fromFile, err = r.readFile(file); err != nil {
			return err
		}
	}
	for _, s := range r.settings {
		if given[s] {
			continue
		}
		done, err := r.setFromEnv(s)
		if err != nil || done {
			if err != nil {
				return err
			}
			continue
		}
		for _, fv := range fromFile[s] {
			if err := s.Value.Set(fv.text); err != nil {
				return fmt.Errorf("%s:%d: %s: %w", file, fv.line, fv.key, err)
			}
		}
	}
	return nil
}

func (r *Registry) setFromEnv(s *Setting) (bool, error) {
	try := func(names []string, alias bool) (bool, error) {
		for _, n := range names {
			v, ok := os.LookupEnv(n)
			if !ok || v == "" {
				continue
			}
			if alias {
				r.deprecated("environment variable", n, s.Env[0])
			}
			if err := s.Value.Set(v); err != nil {
				return true, fmt.Errorf("environment variable %s=%q: %w", n, v, err)
			}
			return true, nil
		}
		return false, nil
	}
	if ok, err := try(s.Env, false); ok || err != nil {
		return ok, err
	}
	return try(s.AliasEnv, true)
}

// Given reports whether the setting of flag name was given on the command
// line, by its environment variable or an alias's (after Parse).
func (r *Registry) Given(name string) bool {
	s := r.Lookup(name)
	if s == nil {
		return false
	}
	given := false
	r.fs.Visit(func(f *flag.Flag) { given = given || r.Lookup(f.Name) == s })
	for _, n := range slices.Concat(s.Env, s.AliasEnv) {
		if v, ok := os.LookupEnv(n); ok && v != "" {
			given = true
		}
	}
	return given
}

// newValue returns the flag.Value of field v.
func newValue(v reflect.Value, kind string) flag.Value {
	p := v.Addr().Interface()
	switch kind {
	case "negated":
		return negated{p.(*bool)}
	case "wei", "wei-none", "wei-positive":
		return &Wei{P: p.(**big.Int), Zero: map[string]WeiZero{"wei": WeiZeroAllowed, "wei-none": WeiZeroNone, "wei-positive": WeiZeroRefused}[kind]}
	case "":
	default:
		panic("config: unknown value kind " + kind)
	}
	if fv, ok := p.(flag.Value); ok {
		return fv
	}
	if tu, ok := p.(encoding.TextUnmarshaler); ok {
		return textValue{tu}
	}
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	switch p := p.(type) {
	case *string:
		fs.StringVar(p, "v", *p, "")
	case *bool:
		fs.BoolVar(p, "v", *p, "")
	case *int:
		fs.IntVar(p, "v", *p, "")
	case *int64:
		fs.Int64Var(p, "v", *p, "")
	case *uint64:
		fs.Uint64Var(p, "v", *p, "")
	case *float64:
		fs.Float64Var(p, "v", *p, "")
	case *time.Duration:
		fs.DurationVar(p, "v", *p, "")
	default:
		panic(fmt.Sprintf("config: no flag value for a field of type %s", v.Type()))
	}
	return fs.Lookup("v").Value
}

// textValue is a flag.Value of an encoding.TextUnmarshaler.
type textValue struct{ p encoding.TextUnmarshaler }

func (t textValue) String() string {
	if m, ok := t.p.(encoding.TextMarshaler); ok {
		b, err := m.MarshalText()
		if err == nil {
			return string(b)
		}
	}
	if s, ok := t.p.(fmt.Stringer); ok {
		return s.String()
	}
	return ""
}

func (t textValue) Set(s string) error { return t.p.UnmarshalText([]byte(s)) }

// negated is a boolean flag that sets the opposite of its value: a setting
// named for what it turns off, offered as what it turns on.
type negated struct{ p *bool }

func (f negated) String() string {
	if f.p == nil {
		return "true"
	}
	return strconv.FormatBool(!*f.p)
}

func (f negated) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*f.p = !v
	return nil
}

// IsBoolFlag lets the flag stand alone for true.
func (negated) IsBoolFlag() bool { return true }

// Wei is a flag of a whole number of wei (a uint256, in decimal); Zero says
// what 0 is.
type Wei struct {
	P    **big.Int
	Zero WeiZero
}

// WeiZero is what a Wei flag makes of 0.
type WeiZero int

const (
	// WeiZeroRefused: 0 is an error (the amount must be positive).
	WeiZeroRefused WeiZero = iota
	// WeiZeroNone: 0 or "" means none (nil).
	WeiZeroNone
	// WeiZeroAllowed: 0 is an amount like any other.
	WeiZeroAllowed
)

func (f *Wei) String() string {
	if f == nil || f.P == nil || *f.P == nil {
		return "0"
	}
	return (*f.P).String()
}

// Set parses a decimal amount of wei.
func (f *Wei) Set(s string) error {
	if f.Zero == WeiZeroNone && (s == "" || s == "0") {
		*f.P = nil
		return nil
	}
	v, ok := new(big.Int).SetString(s, 10)
	switch {
	case !ok || v.Sign() < 0 || v.BitLen() > 256:
		return fmt.Errorf("want a decimal amount of wei, got %q", s)
	case v.Sign() == 0 && f.Zero == WeiZeroRefused:
		return errors.New("want a positive amount of wei")
	}
	*f.P = v
	return nil
}
