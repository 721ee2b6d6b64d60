package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// KeyError is one problem with one key of a configuration file. Unknown is set when the key is not part of
// the schema at all; otherwise Problem says what is wrong with its value.
type KeyError struct {
	Source  string // the file name as given to Parse ("" when unnamed)
	Key     string // table path, e.g. "fuse.attr_timeout"
	Unknown bool
	Problem string
}

// Error spells the problem so that an operator can find the line: the key always appears with its table path.
func (e *KeyError) Error() string {
	in := ""
	if e.Source != "" {
		in = " in " + e.Source
	}
	if e.Unknown {
		return fmt.Sprintf("unknown key %q%s", e.Key, in)
	}
	return fmt.Sprintf("key %q%s: %s", e.Key, in, e.Problem)
}

// Load reads and validates the file at path; an empty path means no file, i.e. Default().
func Load(path string) (Config, error) {
	if path == "" {
		return Parse(nil, "")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return Parse(data, path)
}

// file mirrors the schema with untyped leaves, so that type errors can be reported per key in our own words
// and MetaData.Undecoded can name the keys the schema does not have.
type file struct {
	Store    any `toml:"store"`
	ReadOnly any `toml:"read_only"`
	FUSE     struct {
		EntryTimeout    any `toml:"entry_timeout"`
		AttrTimeout     any `toml:"attr_timeout"`
		RefreshInterval any `toml:"refresh_interval"`
		AllowOther      any `toml:"allow_other"`
	} `toml:"fuse"`
	Cache struct {
		SessionsBytes any `toml:"sessions_bytes"`
		ViewsBytes    any `toml:"views_bytes"`
		Index         any `toml:"index"`
		Dir           any `toml:"dir"`
	} `toml:"cache"`
	Writer struct {
		BatchWindow   any `toml:"batch_window"`
		Compression   any `toml:"compression"`
		MaxLineBytes  any `toml:"max_line_bytes"`
		ForeignQuiet  any `toml:"foreign_quiet"`
		MaxFrameBytes any `toml:"max_frame_bytes"`
		MaxSession    any `toml:"max_session_bytes"`
		LiveBytes     any `toml:"live_bytes"`
		LiveIdle      any `toml:"live_idle"`
		Generation    any `toml:"generation"`
	} `toml:"writer"`
	Compaction struct {
		Summarizer any `toml:"summarizer"`
		Command    any `toml:"command"`
		Timeout    any `toml:"timeout"`
		Provider   any `toml:"provider"`
		Model      any `toml:"model"`
		MaxTokens  any `toml:"max_tokens"`
	} `toml:"compaction"`
	Pruner struct {
		ThresholdChars any `toml:"threshold_chars"`
		HeadChars      any `toml:"head_chars"`
		TailChars      any `toml:"tail_chars"`
	} `toml:"pruner"`
	Spill struct {
		Roots any `toml:"roots"`
	} `toml:"spill"`
	SQLite struct {
		JournalMode any `toml:"journal_mode"`
		BusyTimeout any `toml:"busy_timeout"`
	} `toml:"sqlite"`
	Fleet struct {
		ReleaseAfter any `toml:"release_after"`
		Host         any `toml:"host"`
		Timeout      any `toml:"timeout"`
	} `toml:"fleet"`
}

// tables and leaves are the schema's key paths; a key below a leaf belongs to a mistyped value (reported by
// the leaf's own check), not to an unknown key.
var (
	tables = []string{"fuse", "cache", "writer", "compaction", "pruner", "spill", "sqlite", "fleet"}
	leaves = map[string]bool{
		"store": true, "read_only": true,
		"fuse.entry_timeout": true, "fuse.attr_timeout": true, "fuse.refresh_interval": true, "fuse.allow_other": true,
		"cache.sessions_bytes": true, "cache.views_bytes": true, "cache.index": true, "cache.dir": true,
		"writer.batch_window": true, "writer.compression": true, "writer.live_bytes": true, "writer.live_idle": true, "writer.generation": true,
		"compaction.summarizer": true, "compaction.command": true, "compaction.timeout": true,
		"compaction.provider": true, "compaction.model": true, "compaction.max_tokens": true,
		"pruner.threshold_chars": true, "pruner.head_chars": true, "pruner.tail_chars": true,
		"spill.roots":         true,
		"sqlite.journal_mode": true, "sqlite.busy_timeout": true,
		"fleet.release_after": true, "fleet.host": true, "fleet.timeout": true,
	}
)

// Parse validates the TOML text data and applies defaults. source names the file in errors and anchors
// relative paths: they are resolved against filepath.Dir(source) (the working directory when source is "").
func Parse(data []byte, source string) (Config, error) {
	// A first pass into a generic map only establishes that each schema table really is a table: decoding
	// "fuse = 1" into a struct fails with a message that does not follow our key-naming form.
	var generic map[string]any
	md, err := toml.Decode(string(data), &generic)
	if err != nil {
		return Config{}, syntaxError(source, err)
	}
	var errs []error
	for _, t := range tables {
		if typ := md.Type(t); typ != "" && typ != "Hash" {
			errs = append(errs, &KeyError{Source: source, Key: t, Problem: "want a table, got " + tomlTypeName(typ)})
		}
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}

	var f file
	md, err = toml.Decode(string(data), &f)
	if err != nil { // not expected after the first pass; kept so nothing is ever silently dropped
		return Config{}, syntaxError(source, err)
	}
	var reported []string
	for _, k := range md.Undecoded() {
		key := k.String()
		if underAny(key, reported) || underLeaf(key) {
			continue
		}
		reported = append(reported, key)
		errs = append(errs, &KeyError{Source: source, Key: key, Unknown: true})
	}

	v := validator{source: source, base: baseDir(source)}
	c := Default()
	v.path("store", f.Store, &c.Store, true)
	v.boolean("read_only", f.ReadOnly, &c.ReadOnly)

	v.duration("fuse.entry_timeout", f.FUSE.EntryTimeout, &c.FUSE.EntryTimeout, true)
	v.duration("fuse.attr_timeout", f.FUSE.AttrTimeout, &c.FUSE.AttrTimeout, true)
	v.duration("fuse.refresh_interval", f.FUSE.RefreshInterval, &c.FUSE.RefreshInterval, false)
	v.boolean("fuse.allow_other", f.FUSE.AllowOther, &c.FUSE.AllowOther)

	v.size("cache.sessions_bytes", f.Cache.SessionsBytes, &c.Cache.SessionsBytes)
	v.size("cache.views_bytes", f.Cache.ViewsBytes, &c.Cache.ViewsBytes)
	if _, ok := indexDefault(); !ok && f.Cache.Index == nil {
		v.fail("cache.index", fmt.Sprintf(`$%s must be "on" or "off", got %q`, IndexEnv, os.Getenv(IndexEnv)))
	}
	v.boolean("cache.index", f.Cache.Index, &c.Cache.Index)
	if s, ok := f.Cache.Dir.(string); !ok || s != "" { // "" is the default (docs/configuration.md)
		v.path("cache.dir", f.Cache.Dir, &c.Cache.Dir, false)
	}

	v.duration("writer.batch_window", f.Writer.BatchWindow, &c.Writer.BatchWindow, true)
	v.enum("writer.compression", f.Writer.Compression, &c.Writer.Compression, CompressionZstd, CompressionNone)
	v.size("writer.max_line_bytes", f.Writer.MaxLineBytes, &c.Writer.MaxLineBytes)
	v.size("writer.max_frame_bytes", f.Writer.MaxFrameBytes, &c.Writer.MaxFrameBytes)
	v.size("writer.max_session_bytes", f.Writer.MaxSession, &c.Writer.MaxSessionBytes)
	v.duration("writer.foreign_quiet", f.Writer.ForeignQuiet, &c.Writer.ForeignQuiet, true)
	if c.Writer.ForeignQuiet > MaxForeignQuiet {
		v.fail("writer.foreign_quiet", fmt.Sprintf("at most %s (a longer one refuses writes long after a harness stopped), got %s", MaxForeignQuiet, c.Writer.ForeignQuiet))
	}
	if n, ok := f.Writer.Generation.(int64); ok && (n == 0 || n == 4) {
		c.Writer.Generation = strconv.FormatInt(n, 10) // generation = 4, as well as "4"
	} else {
		v.enum("writer.generation", f.Writer.Generation, &c.Writer.Generation, GenerationAuto, Generation0, Generation4)
	}
	v.size("writer.live_bytes", f.Writer.LiveBytes, &c.Writer.LiveBytes)
	v.duration("writer.live_idle", f.Writer.LiveIdle, &c.Writer.LiveIdle, true)
	if d := c.Writer.LiveIdle; d > 0 && d < MinLiveIdle {
		v.fail("writer.live_idle", fmt.Sprintf("0 or at least %s (a shorter idle period reads a session's whole log back between the batches of one turn), got %s", MinLiveIdle, d))
	}

	v.enum("compaction.summarizer", f.Compaction.Summarizer, &c.Compaction.Summarizer, SummarizerExtractive, SummarizerCommand)
	commandOK := v.strings("compaction.command", f.Compaction.Command, &c.Compaction.Command)
	v.duration("compaction.timeout", f.Compaction.Timeout, &c.Compaction.Timeout, false)
	v.name("compaction.provider", f.Compaction.Provider, &c.Compaction.Provider)
	v.name("compaction.model", f.Compaction.Model, &c.Compaction.Model)
	v.integer("compaction.max_tokens", f.Compaction.MaxTokens, &c.Compaction.MaxTokens, "maxTokens", true)
	if f.Compaction.Model == nil {
		c.Compaction.Model = c.Compaction.Summarizer // the summarizer names itself unless configured
	}
	if commandOK && c.Compaction.Summarizer == SummarizerCommand {
		switch {
		case len(c.Compaction.Command) == 0:
			v.fail("compaction.command", `summarizer = "command" needs a non-empty command (argv array)`)
		case c.Compaction.Command[0] == "":
			v.fail("compaction.command", "the program name (first element) must not be empty")
		}
	}

	pruneOK := v.integer("pruner.threshold_chars", f.Pruner.ThresholdChars, &c.Pruner.ThresholdChars, "thresholdChars", true)
	pruneOK = v.integer("pruner.head_chars", f.Pruner.HeadChars, &c.Pruner.HeadChars, "headChars", false) && pruneOK
	pruneOK = v.integer("pruner.tail_chars", f.Pruner.TailChars, &c.Pruner.TailChars, "tailChars", false) && pruneOK
	if pruneOK {
		p := c.Pruner
		if emitted := p.HeadChars + pruneMarkerChars + p.TailChars; emitted > p.ThresholdChars {
			key := "pruner.head_chars"
			if f.Pruner.HeadChars == nil && f.Pruner.TailChars != nil {
				key = "pruner.tail_chars"
			} else if f.Pruner.HeadChars == nil && f.Pruner.TailChars == nil {
				key = "pruner.threshold_chars"
			}
			v.fail(key, fmt.Sprintf("ToolResultPruneConfig: headChars + marker + tailChars (%d) must be at most thresholdChars (%d)",
				emitted, p.ThresholdChars))
		}
	}

	v.paths("spill.roots", f.Spill.Roots, &c.Spill.Roots)

	v.enum("sqlite.journal_mode", f.SQLite.JournalMode, &c.SQLite.JournalMode, JournalWAL, JournalDelete, JournalTruncate, JournalPersist)
	v.duration("sqlite.busy_timeout", f.SQLite.BusyTimeout, &c.SQLite.BusyTimeout, false)

	v.duration("fleet.release_after", f.Fleet.ReleaseAfter, &c.Fleet.ReleaseAfter, false)
	v.hostName("fleet.host", f.Fleet.Host, &c.Fleet.Host)
	v.duration("fleet.timeout", f.Fleet.Timeout, &c.Fleet.Timeout, false)

	errs = append(errs, v.errs...)
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

// syntaxError wraps a TOML decoding error (which carries the line) with the file name.
func syntaxError(source string, err error) error {
	if source == "" {
		return fmt.Errorf("config: %w", err)
	}
	return fmt.Errorf("config %s: %w", source, err)
}

// baseDir is the directory relative paths in source are resolved against.
func baseDir(source string) string {
	if source == "" {
		return ""
	}
	return filepath.Dir(source)
}

// underLeaf reports whether key lies inside a schema leaf (e.g. "fuse.allow_other.x").
func underLeaf(key string) bool {
	for i := strings.LastIndexByte(key, '.'); i > 0; i = strings.LastIndexByte(key[:i], '.') {
		if leaves[key[:i]] {
			return true
		}
	}
	return false
}

// underAny reports whether key is below one of the keys already reported, so that an unknown table is
// named once rather than once per key inside it.
func underAny(key string, parents []string) bool {
	for _, p := range parents {
		if strings.HasPrefix(key, p+".") {
			return true
		}
	}
	return false
}

// validator accumulates per-key problems so that one run reports all of them.
type validator struct {
	source string
	base   string
	errs   []error
}

func (v *validator) fail(key, problem string) {
	v.errs = append(v.errs, &KeyError{Source: v.source, Key: key, Problem: problem})
}

// wrongType reports a value of the wrong TOML type; it returns false for the callers' convenience.
func (v *validator) wrongType(key, want string, got any) bool {
	v.fail(key, fmt.Sprintf("want %s, got %s", want, goTypeName(got)))
	return false
}

func (v *validator) boolean(key string, raw any, dst *bool) {
	if raw == nil {
		return
	}
	b, ok := raw.(bool)
	if !ok {
		v.wrongType(key, "a boolean", raw)
		return
	}
	*dst = b
}

// duration parses a Go duration string; zeroOK says whether 0 means something for this key.
func (v *validator) duration(key string, raw any, dst *time.Duration, zeroOK bool) {
	if raw == nil {
		return
	}
	s, ok := raw.(string)
	if !ok {
		v.wrongType(key, `a duration string such as "1s"`, raw)
		return
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		v.fail(key, fmt.Sprintf(`want a duration such as "1s" or "200ms", got %q`, s))
	case d < 0:
		v.fail(key, fmt.Sprintf("duration must not be negative, got %q", s))
	case d == 0 && !zeroOK:
		v.fail(key, fmt.Sprintf("duration must be positive, got %q", s))
	default:
		*dst = d
	}
}

var sizeRE = regexp.MustCompile(`^([0-9]+) ?(B|KiB|MiB|GiB|TiB)?$`)

var sizeUnits = map[string]int64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}

// size accepts a byte count as a TOML integer or a string with a binary unit.
func (v *validator) size(key string, raw any, dst *int64) {
	if raw == nil {
		return
	}
	switch x := raw.(type) {
	case int64:
		if x < 0 {
			v.fail(key, fmt.Sprintf("size must not be negative, got %d", x))
			return
		}
		*dst = x
	case string:
		m := sizeRE.FindStringSubmatch(x)
		if m == nil {
			v.fail(key, fmt.Sprintf(`want a size in bytes or with a binary unit (B, KiB, MiB, GiB, TiB) such as "256MiB", got %q`, x))
			return
		}
		n, err := strconv.ParseInt(m[1], 10, 64)
		unit := sizeUnits[m[2]]
		if err != nil || n > math.MaxInt64/unit {
			v.fail(key, fmt.Sprintf("size %q is too large", x))
			return
		}
		*dst = n * unit
	default:
		v.wrongType(key, `a size (integer bytes or a string such as "256MiB")`, raw)
	}
}

func (v *validator) enum(key string, raw any, dst *string, allowed ...string) {
	if raw == nil {
		return
	}
	s, ok := raw.(string)
	if !ok {
		v.wrongType(key, "a string", raw)
		return
	}
	for _, a := range allowed {
		if s == a {
			*dst = s
			return
		}
	}
	v.fail(key, fmt.Sprintf("want %s, got %q", quoteList(allowed), s))
}

// name reads a non-empty string (the harness requires provider and model to be non-empty).
func (v *validator) name(key string, raw any, dst *string) {
	if raw == nil {
		return
	}
	s, ok := raw.(string)
	switch {
	case !ok:
		v.wrongType(key, "a string", raw)
	case strings.TrimSpace(s) == "":
		v.fail(key, "must be a non-empty string")
	default:
		*dst = s
	}
}

// hostName reads a host name as the fleet store records it: non-empty, printable, without whitespace (it
// names a by-host/ directory and appears in refusals).
func (v *validator) hostName(key string, raw any, dst *string) {
	if raw == nil {
		return
	}
	s, ok := raw.(string)
	if !ok {
		v.wrongType(key, "a string", raw)
		return
	}
	if s == "" || s == "." || s == ".." || len(s) > 255 || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == '/' || r == 0x7f }) {
		v.fail(key, fmt.Sprintf("want a host name (no whitespace, no '/', at most 255 bytes), got %q", s))
		return
	}
	*dst = s
}

// strings reads an array of strings; it reports whether the key is usable (absent or valid).
func (v *validator) strings(key string, raw any, dst *[]string) bool {
	if raw == nil {
		return true
	}
	list, ok := stringList(raw)
	if !ok {
		return v.wrongType(key, "an array of strings", raw)
	}
	*dst = list
	return true
}

// integer applies ToolResultPruneConfig's integer rules, quoting its message with the camelCase name.
func (v *validator) integer(key string, raw any, dst *int, upstreamName string, positive bool) bool {
	if raw == nil {
		return true
	}
	n, ok := raw.(int64)
	if !ok {
		return v.wrongType(key, "an integer", raw)
	}
	switch {
	case positive && n <= 0:
		v.fail(key, fmt.Sprintf("ToolResultPruneConfig: %s (%d) must be a positive integer", upstreamName, n))
		return false
	case n < 0:
		v.fail(key, fmt.Sprintf("ToolResultPruneConfig: %s (%d) must be a non-negative integer", upstreamName, n))
		return false
	case n > math.MaxInt32:
		// Budgets are code-point counts of one tool result; anything this large is a typo, and keeping the
		// sum below overflow on every platform keeps the budget check exact.
		v.fail(key, fmt.Sprintf("%d is too large (at most %d)", n, math.MaxInt32))
		return false
	}
	*dst = int(n)
	return true
}

// path reads one path, expanding "~" and anchoring relative paths at the config file's directory.
// withPrefix allows a backend prefix as on the command line's STORE.
func (v *validator) path(key string, raw any, dst *string, withPrefix bool) {
	if raw == nil {
		return
	}
	s, ok := raw.(string)
	if !ok {
		v.wrongType(key, "a path string", raw)
		return
	}
	if withPrefix && (strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")) {
		*dst = s // a fleet store's DSN: not a path
		return
	}
	prefix := ""
	if withPrefix {
		for _, p := range []string{"jsonl+raw:", "jsonl:", "sqlite:"} {
			if strings.HasPrefix(s, p) {
				prefix, s = p, s[len(p):]
				break
			}
		}
	}
	if s == "" {
		v.fail(key, "path must not be empty")
		return
	}
	if strings.ContainsRune(s, 0) {
		v.fail(key, "path must not contain a NUL byte")
		return
	}
	*dst = prefix + absPath(ExpandHome(s), v.base)
}

func (v *validator) paths(key string, raw any, dst *[]string) {
	if raw == nil {
		return
	}
	list, ok := stringList(raw)
	if !ok {
		v.wrongType(key, "an array of path strings", raw)
		return
	}
	out := make([]string, 0, len(list))
	for i, s := range list {
		elem := fmt.Sprintf("%s[%d]", key, i)
		switch {
		case s == "":
			v.fail(elem, "path must not be empty")
		case strings.ContainsRune(s, 0):
			v.fail(elem, "path must not contain a NUL byte")
		default:
			out = append(out, absPath(ExpandHome(s), v.base))
		}
	}
	*dst = out
}

// stringList converts a decoded TOML array whose elements are all strings.
func stringList(raw any) ([]string, bool) {
	arr, ok := raw.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(arr))
	for _, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

func quoteList(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, " or ")
}

// goTypeName names a decoded TOML value's type in TOML's own terms.
func goTypeName(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("string %q", x)
	case int64:
		return fmt.Sprintf("integer %d", x)
	case float64:
		return "float " + strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return "boolean " + strconv.FormatBool(x)
	case time.Time:
		return "datetime"
	case []any, []map[string]any:
		return "array"
	case map[string]any:
		return "table"
	}
	return fmt.Sprintf("%T", v)
}

// tomlTypeName turns MetaData.Type's spelling into the words a TOML user knows.
func tomlTypeName(t string) string {
	switch t {
	case "ArrayHash":
		return "array of tables"
	case "Hash":
		return "table"
	case "Datetime", "DatetimeLocal", "DateLocal", "TimeLocal":
		return "datetime"
	}
	return strings.ToLower(t)
}
