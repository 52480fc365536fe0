package acceptance

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"path"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// FieldError is one problem with one field of a spec. Path names the field
// the way YAML and JSON spell it ("steps[2].fio.block_size"), so that a form
// can put Message next to its input and the YAML view can show the path;
// Path is empty for a problem with the document as a whole.
type FieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
	// Line is the 1-based line of the field in an imported document, when
	// the error came from an import; zero otherwise.
	Line int `json:"line,omitempty"`
}

func (e FieldError) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// ValidationErrors lists every problem found, in document order.
type ValidationErrors []FieldError

func (v ValidationErrors) Error() string {
	const shown = 5
	parts := make([]string, 0, shown+1)
	for i, e := range v {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more", len(v)-shown))
			break
		}
		parts = append(parts, e.Error())
	}
	return strings.Join(parts, "; ")
}

// Messages returns the messages about exactly the field at path, for a form.
func (v ValidationErrors) Messages(path string) []string {
	var out []string
	for _, e := range v {
		if e.Path == path {
			out = append(out, e.Message)
		}
	}
	return out
}

// Limits that reject absurd values. They are wide enough for any real test
// and narrow enough that a typo (an extra zero or three) is caught.
const (
	MaxSpecDuration   = Duration(7 * 24 * time.Hour)
	MaxTitleLen       = 200
	MaxDescriptionLen = 10000
	MaxNameLen        = 64
	MaxSteps          = 100
	MaxCriteria       = 100
	MaxRepetitions    = 100
	MaxIODepth        = 4096
	MaxNumJobs        = 1024
	MinBlockSize      = ByteSize(512)
	MaxBlockSize      = ByteSize(64 << 20)
	MaxFioSize        = ByteSize(1 << 50) // 1 PiB
	// MinFioRuntime is the shortest fio step the probe runs: below it fio's
	// per-second figures have nothing to average.
	MinFioRuntime     = Duration(time.Second)
	MaxConcurrency    = 100000
	MaxRate           = 1e6 // requests per second
	MaxSweepLevels    = 64
	MaxTokens         = 1000000
	MaxPrefixDistinct = 100000
	MaxRequests       = 10000000
	MaxSLOMs          = 86400000 // one day
	MaxArgs           = 256
	MaxArgLen         = 4096
	MaxPathLen        = 4096
	MaxFaultDelay     = Duration(time.Minute)
	MaxRateMbit       = 1e6 // 1 Tbit/s
	MaxMinSamples     = 1000000000
	MaxRelativePct    = 10000 // +10000 % is a 101-fold change
	MaxHelpLen        = 2000
)

var (
	safeNameRE   = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	bareProgRE   = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._+-]*$`)
	interfaceRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,14}$`) // Linux IFNAMSIZ - 1
	controllerRE = regexp.MustCompile(`^nvme[0-9]{1,4}$`)
)

// maxValidationErrors bounds the errors reported for one spec: past it,
// more are noise, and an absurd document should not cost much to refuse.
const maxValidationErrors = 100

// specChecker collects field errors.
type specChecker struct{ errs ValidationErrors }

func (c *specChecker) add(path, format string, args ...any) {
	switch {
	case len(c.errs) < maxValidationErrors:
		c.errs = append(c.errs, FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
	case len(c.errs) == maxValidationErrors:
		c.errs = append(c.errs, FieldError{Message: "too many errors; fix these first"})
	}
}

func (c *specChecker) result() ValidationErrors {
	if len(c.errs) == 0 {
		return nil
	}
	return c.errs
}

func specField(parent, field string) string {
	if parent == "" {
		return field
	}
	return parent + "." + field
}

func specIndex(parent string, i int) string { return parent + "[" + strconv.Itoa(i) + "]" }

func (c *specChecker) enum(p, v string, set []string) {
	if v == "" {
		c.add(p, "is required: one of %s", strings.Join(set, ", "))
		return
	}
	if !inSet(v, set) {
		c.add(p, "%q is not allowed: use one of %s", v, strings.Join(set, ", "))
	}
}

func (c *specChecker) intRange(p string, v, lo, hi int) {
	if v < lo || v > hi {
		c.add(p, "must be between %d and %d", lo, hi)
	}
}

// finite reports NaN and infinities, which no field accepts.
func (c *specChecker) finite(p string, v float64) bool {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		c.add(p, "must be a finite number")
		return false
	}
	return true
}

func (c *specChecker) duration(p string, d Duration, required bool) {
	switch {
	case d < 0:
		c.add(p, "must not be negative")
	case d == 0 && required:
		c.add(p, "is required (a duration like 30s, 5m or 1h)")
	case d > MaxSpecDuration:
		c.add(p, "must be at most 7 days (168h)")
	}
}

func (c *specChecker) title(p, v string) {
	switch {
	case strings.TrimSpace(v) == "":
		c.add(p, "is required")
	case utf8.RuneCountInString(v) > MaxTitleLen:
		c.add(p, "must be at most %d characters", MaxTitleLen)
	case strings.TrimSpace(v) != v:
		c.add(p, "must not start or end with spaces")
	case strings.ContainsAny(v, "\n\t"):
		c.add(p, "must be one line")
	}
}

func (c *specChecker) safeName(p, v, what string) {
	switch {
	case v == "":
		c.add(p, "is required")
	case len(v) > MaxNameLen:
		c.add(p, "must be at most %d characters", MaxNameLen)
	case !safeNameRE.MatchString(v):
		c.add(p, "%s names may use only letters, digits, - and _", what)
	}
}

func (c *specChecker) maxLen(p, v string, n int) {
	if utf8.RuneCountInString(v) > n {
		c.add(p, "must be at most %d characters", n)
	}
}

func (c *specChecker) oneLine(p, v string, n int) {
	if strings.ContainsAny(v, "\n\t") {
		c.add(p, "must be one line")
	} else {
		c.maxLen(p, v, n)
	}
}

// absPath checks a path on the lab host: absolute and already clean, so
// that "/dev/../dev/sda" cannot hide a device.
func (c *specChecker) absPath(p, v string) bool {
	switch {
	case len(v) > MaxPathLen:
		c.add(p, "must be at most %d bytes", MaxPathLen)
	case !path.IsAbs(v):
		c.add(p, "must be an absolute path, like /mnt/nvme/testfile")
	case path.Clean(v) != v:
		c.add(p, "must be a clean path (no .., //, trailing / or ./); did you mean %s?", path.Clean(v))
	case strings.ContainsAny(v, "\n\t"):
		c.add(p, "must be one line")
	default:
		return true
	}
	return false
}

// CheckEndpointURL checks an inference endpoint's URL as profiles do: an
// http:// or https:// URL without credentials or a fragment, on one line.
func CheckEndpointURL(v string) error {
	c := &specChecker{}
	c.httpURL("url", v)
	if errs := c.result(); len(errs) > 0 {
		return errors.New(errs[0].Message)
	}
	return nil
}

func (c *specChecker) httpURL(p, v string) {
	const example = "an http:// or https:// URL, like http://10.0.0.5:8000/v1"
	if strings.ContainsAny(v, " \t\n") {
		c.add(p, "must be %s (no spaces)", example)
		return
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		c.add(p, "must be %s", example)
		return
	}
	if u.User != nil {
		c.add(p, "must not contain a user name or password")
		return
	}
	if u.Fragment != "" || strings.Contains(v, "#") {
		c.add(p, "must not contain a #fragment")
		return
	}
	if u.Port() != "" {
		if n, err := strconv.Atoi(u.Port()); err != nil || n < 1 || n > 65535 {
			c.add(p, "has an invalid port %q", u.Port())
			return
		}
	}
	if len(v) > 2048 {
		c.add(p, "must be at most 2048 characters")
	}
}

// checkText rejects NUL bytes, invalid UTF-8 and control characters (other
// than tab and newline) in every string of a spec, found by reflection so
// that a field added later is covered too.
func checkText(c *specChecker, v reflect.Value, p string) {
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		switch {
		case strings.IndexByte(s, 0) >= 0:
			c.add(p, "must not contain NUL bytes")
		case !utf8.ValidString(s):
			c.add(p, "must be valid UTF-8 text")
		case strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }) >= 0:
			c.add(p, "must not contain control characters")
		}
	case reflect.Pointer:
		if !v.IsNil() {
			checkText(c, v.Elem(), p)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			checkText(c, v.Index(i), specIndex(p, i))
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			if name := tagName(t.Field(i), "json"); name != "" {
				checkText(c, v.Field(i), specField(p, name))
			}
		}
	}
}

// tagName returns the field's name in the given struct tag, or "" when the
// field is not encoded.
func tagName(f reflect.StructField, key string) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get(key), ",")
	if name == "-" {
		return ""
	}
	return name
}

// ValidateProfile checks a profile after filling its defaults, and returns
// every problem found (nil when there is none).
func ValidateProfile(spec ProfileSpec) ValidationErrors {
	p := spec.Normalized()
	c := &specChecker{}
	checkText(c, reflect.ValueOf(p), "")

	if p.SchemaVersion < 1 || p.SchemaVersion > ProfileSchemaVersion {
		c.add("schema_version", "must be between 1 and %d", ProfileSchemaVersion)
	}
	c.title("name", p.Name)
	c.maxLen("description", p.Description, MaxDescriptionLen)
	c.enum("purpose", string(p.Purpose), purposes)
	c.enum("storage.transport", string(p.Storage.Transport), transports)
	c.oneLine("storage.array_model", p.Storage.ArrayModel, MaxTitleLen)
	c.oneLine("storage.namespace", p.Storage.Namespace, MaxTitleLen)
	c.intRange("repetitions", p.Repetitions, 1, MaxRepetitions)
	c.duration("warmup", p.Warmup, false)
	c.duration("run_timeout", p.RunTimeout, false)

	switch {
	case len(p.Steps) == 0:
		c.add("steps", "a profile needs at least one step")
	case len(p.Steps) > MaxSteps:
		c.add("steps", "must have at most %d steps", MaxSteps)
	}
	first := map[string]int{} // step name → index of its first use
	for i, s := range p.Steps {
		if j, dup := first[s.Name]; dup && s.Name != "" {
			c.add(specIndex("steps", i)+".name", "%q is already the name of steps[%d]; step names must be unique", s.Name, j)
		} else {
			first[s.Name] = i
		}
	}
	for i, s := range p.Steps {
		validateStep(c, p, i, s, first)
	}
	validateGroups(c, p)
	validateRoles(c, p, first)
	if p.Telemetry != nil {
		validateTelemetry(c, "telemetry", p.Telemetry)
	}
	return c.result()
}

// MaxExporters bounds the exporters a profile scrapes every second.
const MaxExporters = 8

// promName matches a Prometheus metric or label name.
var promName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

func validateTelemetry(c *specChecker, tp string, t *TelemetrySpec) {
	ep := specField(tp, "exporters")
	if len(t.Exporters) > MaxExporters {
		c.add(ep, "must list at most %d exporters", MaxExporters)
	}
	names := map[string]int{}
	for i, e := range t.Exporters {
		p := specIndex(ep, i)
		c.httpURL(specField(p, "url"), e.URL)
		c.enum(specField(p, "kind"), e.Kind, exporterKinds)
		name := e.Name
		if name == "" {
			name = e.Kind
		} else {
			c.safeName(specField(p, "name"), e.Name, "exporter")
		}
		if j, dup := names[name]; dup {
			c.add(p, "is named %q like exporters[%d]; give one of them a name", name, j)
		}
		names[name] = i
		switch {
		case e.Kind == ExporterCustom && e.Mapping == nil:
			c.add(specField(p, "mapping"), "is required for kind custom: say which series give the readings")
		case e.Kind != ExporterCustom && e.Mapping != nil:
			c.add(specField(p, "mapping"), "is only for kind custom; %s has a built-in mapping", e.Kind)
		case e.Mapping != nil:
			validateMapping(c, specField(p, "mapping"), e.Mapping)
		}
	}
}

func validateMapping(c *specChecker, mp string, m *ExporterMapping) {
	if m.DeviceLabel != "" && !promName.MatchString(m.DeviceLabel) {
		c.add(specField(mp, "device_label"), "must be a Prometheus label name, like gpu")
	}
	total := 0
	for _, r := range []struct {
		field  string
		series []ExporterSeries
	}{{"util", m.Util}, {"mem_used", m.MemUsed}, {"mem_bw", m.MemBW}, {"power", m.Power}} {
		total += len(r.series)
		if len(r.series) > 4 {
			c.add(specField(mp, r.field), "must list at most 4 series")
		}
		for i, s := range r.series {
			sp := specIndex(specField(mp, r.field), i)
			if !promName.MatchString(s.Metric) || len(s.Metric) > 200 {
				c.add(specField(sp, "metric"), "must be a Prometheus metric name, like DCGM_FI_DEV_GPU_UTIL")
			}
			if c.finite(specField(sp, "scale"), s.Scale) && s.Scale < 0 {
				c.add(specField(sp, "scale"), "must not be negative")
			}
		}
	}
	if total == 0 {
		c.add(mp, "must map at least one of util, mem_used, mem_bw and power")
	}
}

// Validate reports the profile's problems as ValidationErrors, or nil.
func (p ProfileSpec) Validate() error {
	if errs := ValidateProfile(p); errs != nil {
		return errs
	}
	return nil
}

func validateStep(c *specChecker, p ProfileSpec, i int, s StepSpec, names map[string]int) {
	sp := specIndex("steps", i)
	c.safeName(specField(sp, "name"), s.Name, "step")
	c.enum(specField(sp, "kind"), string(s.Kind), stepKinds)
	c.duration(specField(sp, "timeout"), s.Timeout, false)

	// Exactly the parameter block of the kind is set.
	blocks := []struct {
		kind StepKind
		set  bool
	}{
		{StepFio, s.Fio != nil}, {StepInference, s.Inference != nil}, {StepCommand, s.Command != nil},
		{StepPause, s.Pause != nil}, {StepFault, s.Fault != nil}, {StepGPUPath, s.GPUPath != nil},
	}
	for _, b := range blocks {
		switch {
		case b.kind == s.Kind && !b.set:
			c.add(specField(sp, string(b.kind)), "is required for a %s step", s.Kind)
		case b.kind != s.Kind && b.set && s.Kind != "":
			c.add(specField(sp, string(b.kind)), "must not be set on a %s step", s.Kind)
		}
	}

	switch {
	case s.Kind == StepFio && s.Fio != nil:
		validateFio(c, sp, p, s)
	case s.Kind == StepInference && s.Inference != nil:
		validateInference(c, specField(sp, "inference"), p, s.Inference)
	case s.Kind == StepCommand && s.Command != nil:
		validateCommand(c, specField(sp, "command"), s.Command)
	case s.Kind == StepPause && s.Pause != nil:
		c.duration(specField(sp, "pause.duration"), s.Pause.Duration, true)
		if s.Timeout > 0 && s.Timeout <= s.Pause.Duration {
			c.add(specField(sp, "timeout"), "must be longer than the pause (%s)", s.Pause.Duration)
		}
	case s.Kind == StepFault && s.Fault != nil:
		validateFault(c, specField(sp, "fault"), p, i, s.Fault, names)
	case s.Kind == StepGPUPath && s.GPUPath != nil:
		validateGPUPath(c, specField(sp, "gpu_path"), s.GPUPath)
	}
}

// MaxGPUPathSize bounds what a gpu-path step reads per path.
const MaxGPUPathSize = ByteSize(1 << 40)

func validateGPUPath(c *specChecker, gp string, g *GPUPathStep) {
	if g.Target == "" {
		c.add(specField(gp, "target"), "is required: a file (/mnt/nvme/accord.dat) or a block device (/dev/nvme1n1) to read")
	} else {
		c.absPath(specField(gp, "target"), g.Target)
	}
	bs := g.BlockSize
	switch {
	case bs == 0:
		c.add(specField(gp, "block_size"), "is required (a size like 1MiB)")
	case bs < 4096 || bs > MaxBlockSize || bs&(bs-1) != 0:
		c.add(specField(gp, "block_size"), "must be a power of two between 4 KiB and 64 MiB (O_DIRECT needs aligned I/O)")
	}
	switch {
	case g.Size <= 0:
		c.add(specField(gp, "size"), "is required (how much each path reads, like 4GiB)")
	case g.Size > MaxGPUPathSize:
		c.add(specField(gp, "size"), "must be at most 1 TiB")
	case bs > 0 && g.Size < bs:
		c.add(specField(gp, "size"), "must be at least the block size (%s)", bs)
	}
	c.intRange(specField(gp, "gpu"), g.GPU, 0, 1023)
}

func validateFio(c *specChecker, sp string, p ProfileSpec, s StepSpec) {
	fp, f := specField(sp, "fio"), s.Fio
	c.enum(specField(fp, "rw"), f.RW, rwPatterns)
	bs := f.BlockSize
	switch {
	case bs == 0:
		c.add(specField(fp, "block_size"), "is required (a size like 4KiB or 1MiB)")
	case bs < MinBlockSize || bs > MaxBlockSize || bs&(bs-1) != 0:
		c.add(specField(fp, "block_size"), "must be a power of two between 512 B and 64 MiB (4KiB, 128KiB, 1MiB, ...)")
	}
	c.intRange(specField(fp, "iodepth"), f.IODepth, 1, MaxIODepth)
	c.intRange(specField(fp, "numjobs"), f.NumJobs, 1, MaxNumJobs)
	c.enum(specField(fp, "ioengine"), f.IOEngine, ioEngines)
	c.duration(specField(fp, "runtime"), f.Runtime, true)
	if f.Runtime > 0 && f.Runtime < MinFioRuntime {
		c.add(specField(fp, "runtime"), "must be at least %s", MinFioRuntime)
	}
	if s.Timeout > 0 && s.Timeout <= f.Runtime+p.Warmup {
		c.add(specField(sp, "timeout"), "must be longer than the fio runtime plus the warmup (%s)", f.Runtime+p.Warmup)
	}
	switch {
	case RWIsMixed(f.RW):
		c.intRange(specField(fp, "rwmixread"), f.RWMixRead, 0, 100)
	case f.RWMixRead != 0:
		c.add(specField(fp, "rwmixread"), "only applies to rw and randrw")
	}

	if f.Target == "" {
		c.add(specField(fp, "target"), "is required: a file (/mnt/nvme/accord.dat) or a block device (/dev/nvme1n1)")
		return
	}
	if !c.absPath(specField(fp, "target"), f.Target) {
		return
	}
	if strings.Contains(f.Target, ":") {
		// fio reads ':' in a filename as a list separator.
		c.add(specField(fp, "target"), "must not contain ':' (fio reads it as a list of files)")
	}
	device := strings.HasPrefix(f.Target, "/dev/")
	switch {
	case f.Size < 0:
		c.add(specField(fp, "size"), "must not be negative")
	case f.Size == 0 && !device:
		c.add(specField(fp, "size"), "is required for a file target (a size like 10GiB)")
	case f.Size > MaxFioSize:
		c.add(specField(fp, "size"), "must be at most 1 PiB")
	case f.Size > 0 && f.Size < bs:
		c.add(specField(fp, "size"), "must be at least the block size (%s)", bs)
	}
	// The host's own permission is checked again on the host; this makes the
	// intent visible in the spec. (A symlink to a device is caught there.)
	if device && RWWrites(f.RW) && !f.Destructive {
		c.add(specField(fp, "destructive"), "must be true: this step writes to the block device %s and destroys its data", f.Target)
	}
}

func indexOfStep(p ProfileSpec, name string) int {
	for i, s := range p.Steps {
		if s.Name == name {
			return i
		}
	}
	return -1
}

func validateInference(c *specChecker, ip string, p ProfileSpec, in *InferenceStep) {
	if in.Endpoint == "" {
		c.add(specField(ip, "endpoint"), "is required: the server's base URL, like http://10.0.0.5:8000/v1")
	} else {
		c.httpURL(specField(ip, "endpoint"), in.Endpoint)
	}
	if strings.TrimSpace(in.Model) == "" {
		c.add(specField(ip, "model"), "is required: the model name the server serves")
	} else {
		c.oneLine(specField(ip, "model"), in.Model, 256)
	}
	c.enum(specField(ip, "api"), in.API, apis)
	if in.Dataset != "" {
		c.absPath(specField(ip, "dataset"), in.Dataset)
	}
	validateTokens(c, specField(ip, "prompt_tokens"), in.PromptTokens, in.Dataset == "")
	validateTokens(c, specField(ip, "output_tokens"), in.OutputTokens, in.Dataset == "")
	if in.Prefix != nil {
		validatePrefix(c, specField(ip, "prefix"), in)
	}
	validateLoad(c, specField(ip, "load"), in.Load)

	c.duration(specField(ip, "duration"), in.Duration, false)
	if in.Requests < 0 || in.Requests > MaxRequests {
		c.add(specField(ip, "requests"), "must be between 1 and %d", MaxRequests)
	}
	if in.Duration == 0 && in.Requests == 0 {
		c.add(specField(ip, "duration"), "set a duration, a number of requests, or both, to end each load level")
	}
	if in.Duration > 0 && p.Warmup > 0 && in.Duration <= p.Warmup {
		c.add(specField(ip, "duration"), "must be longer than the profile's warmup (%s), or nothing is measured", p.Warmup)
	}
	c.duration(specField(ip, "request_timeout"), in.RequestTimeout, true)
	for _, f := range []struct {
		name string
		v    float64
	}{{"ttft_ms", in.SLO.TTFTMs}, {"tpot_ms", in.SLO.TPOTMs}, {"e2el_ms", in.SLO.E2ELMs}} {
		fp := specField(ip, "slo."+f.name)
		if c.finite(fp, f.v) && (f.v < 0 || f.v > MaxSLOMs) {
			c.add(fp, "must be between 0 and %d ms (one day)", MaxSLOMs)
		}
	}
	if in.MetricsURL != "" {
		c.httpURL(specField(ip, "metrics_url"), in.MetricsURL)
	}
}

// validatePrefix checks prefix reuse: one way of sharing prefixes
// (tokens, share or sweep), and a reuse sweep as the step's only sweep.
func validatePrefix(c *specChecker, pp string, in *InferenceStep) {
	pr := in.Prefix
	c.intRange(specField(pp, "distinct"), pr.Distinct, 1, MaxPrefixDistinct)
	ways := 0
	for _, set := range []bool{pr.Tokens != 0, pr.Share != 0, len(pr.Sweep) > 0} {
		if set {
			ways++
		}
	}
	switch {
	case ways == 0:
		// The message of profiles saved before share and sweep existed.
		c.intRange(specField(pp, "tokens"), pr.Tokens, 1, MaxTokens)
		return
	case ways > 1:
		c.add(pp, "set one of tokens (a prefix before each prompt), share (a share of each prompt) and sweep (shares run in turn)")
	}
	if pr.Tokens != 0 {
		c.intRange(specField(pp, "tokens"), pr.Tokens, 1, MaxTokens)
	}
	if pr.Share != 0 && c.finite(specField(pp, "share"), pr.Share) && (pr.Share < 0 || pr.Share > 1) {
		c.add(specField(pp, "share"), "must be more than 0 and at most 1 (the share of each prompt that is a shared prefix)")
	}
	if len(pr.Sweep) > MaxSweepLevels {
		c.add(specField(pp, "sweep"), "must have at most %d levels", MaxSweepLevels)
	} else {
		seen := map[float64]bool{}
		for i, v := range pr.Sweep {
			vp := specIndex(specField(pp, "sweep"), i)
			if !c.finite(vp, v) {
				continue
			}
			if v < 0 || v > 1 {
				c.add(vp, "shares must be between 0 and 1 (0: no shared prefix, 1: all of each prompt)")
			}
			if seen[v] {
				c.add(vp, "repeats the share %g; levels must be unique", v)
			}
			seen[v] = true
		}
	}
	if (pr.Share != 0 || len(pr.Sweep) > 0) && in.Dataset != "" {
		c.add(pp, "share and sweep shape synthetic prompts; a dataset's prompts are sent as they are")
	}
	if len(pr.Sweep) > 0 && in.MetricsURL == "" {
		c.add(specField(pp, "sweep"), "needs metrics_url: the hit ratio each share gives is read from the server's own counters (vLLM's prefix_cache_hits and queries, SGLang's cached and prompt tokens)")
	}
	if len(pr.Sweep) > 0 && len(in.Load.Sweep) > 0 {
		c.add(specField(pp, "sweep"), "a step sweeps one thing at a time: leave load.sweep empty (the load's single level runs at every share), or sweep the load in a step of its own")
	}
}

func validateTokens(c *specChecker, tp string, t TokenDist, required bool) {
	if t == (TokenDist{}) {
		if required {
			c.add(specField(tp, "mean"), "is required (a token count like 1024), unless the step uses a dataset")
		}
		return
	}
	c.enum(specField(tp, "dist"), t.Dist, dists)
	switch t.Dist {
	case DistFixed:
		c.intRange(specField(tp, "mean"), t.Mean, 1, MaxTokens)
		if t.Min != 0 {
			c.add(specField(tp, "min"), "only applies to uniform and normal distributions")
		}
		if t.Max != 0 {
			c.add(specField(tp, "max"), "only applies to uniform and normal distributions")
		}
		if t.StdDev != 0 {
			c.add(specField(tp, "stddev"), "only applies to the normal distribution")
		}
	case DistUniform:
		c.intRange(specField(tp, "min"), t.Min, 1, MaxTokens)
		c.intRange(specField(tp, "max"), t.Max, 1, MaxTokens)
		if t.Max < t.Min {
			c.add(specField(tp, "max"), "must be at least min (%d)", t.Min)
		} else if t.Mean < t.Min || t.Mean > t.Max {
			c.add(specField(tp, "mean"), "must be between min and max")
		}
		if t.StdDev != 0 {
			c.add(specField(tp, "stddev"), "only applies to the normal distribution")
		}
	case DistNormal:
		c.intRange(specField(tp, "mean"), t.Mean, 1, MaxTokens)
		if c.finite(specField(tp, "stddev"), t.StdDev) && (t.StdDev <= 0 || t.StdDev > MaxTokens) {
			c.add(specField(tp, "stddev"), "must be more than 0 and at most %d", MaxTokens)
		}
		// min and max are optional clipping bounds.
		if t.Min != 0 {
			c.intRange(specField(tp, "min"), t.Min, 1, MaxTokens)
		}
		if t.Max != 0 {
			c.intRange(specField(tp, "max"), t.Max, 1, MaxTokens)
		}
		if t.Min != 0 && t.Mean < t.Min {
			c.add(specField(tp, "mean"), "must be at least min (%d)", t.Min)
		}
		if t.Max != 0 && t.Mean > t.Max {
			c.add(specField(tp, "mean"), "must be at most max (%d)", t.Max)
		}
	}
}

func validateLoad(c *specChecker, lp string, l Load) {
	c.enum(specField(lp, "mode"), l.Mode, loadModes)
	levels := l.Sweep
	if len(levels) > MaxSweepLevels {
		c.add(specField(lp, "sweep"), "must have at most %d levels", MaxSweepLevels)
		levels = nil // the levels themselves do not matter yet
	}
	for i, v := range levels {
		c.finite(specIndex(specField(lp, "sweep"), i), v)
	}
	seen := map[float64]bool{}
	for i, v := range levels {
		if seen[v] {
			c.add(specIndex(specField(lp, "sweep"), i), "repeats the level %g; levels must be unique", v)
		}
		seen[v] = true
	}
	switch l.Mode {
	case LoadConcurrency:
		if len(l.Sweep) == 0 {
			c.intRange(specField(lp, "concurrency"), l.Concurrency, 1, MaxConcurrency)
		} else {
			if l.Concurrency != 0 {
				c.add(specField(lp, "concurrency"), "leave empty when a sweep is set: the sweep gives the levels")
			}
			for i, v := range levels {
				if v != math.Trunc(v) || v < 1 || v > MaxConcurrency {
					c.add(specIndex(specField(lp, "sweep"), i), "concurrency levels must be whole numbers between 1 and %d", MaxConcurrency)
				}
			}
		}
		if l.Rate != 0 {
			c.add(specField(lp, "rate"), "only applies in rate mode")
		}
		if l.Arrival != "" {
			c.add(specField(lp, "arrival"), "only applies in rate mode")
		}
		if l.MaxConcurrency != 0 {
			c.add(specField(lp, "max_concurrency"), "only applies in rate mode")
		}
	case LoadRate:
		if len(l.Sweep) == 0 {
			if c.finite(specField(lp, "rate"), l.Rate) && (l.Rate <= 0 || l.Rate > MaxRate) {
				c.add(specField(lp, "rate"), "must be more than 0 and at most %g requests per second", float64(MaxRate))
			}
		} else {
			if l.Rate != 0 {
				c.add(specField(lp, "rate"), "leave empty when a sweep is set: the sweep gives the levels")
			}
			for i, v := range levels {
				if v <= 0 || v > MaxRate {
					c.add(specIndex(specField(lp, "sweep"), i), "rates must be more than 0 and at most %g requests per second", float64(MaxRate))
				}
			}
		}
		c.enum(specField(lp, "arrival"), l.Arrival, arrivals)
		c.intRange(specField(lp, "max_concurrency"), l.MaxConcurrency, 0, MaxConcurrency)
		if l.Concurrency != 0 {
			c.add(specField(lp, "concurrency"), "only applies in concurrency mode (use max_concurrency to cap rate mode)")
		}
	}
}

func validateCommand(c *specChecker, cp string, cmd *CommandStep) {
	switch {
	case cmd.Program == "":
		c.add(specField(cp, "program"), "is required: an absolute path (/usr/bin/tool) or a program name (tool)")
	case strings.HasPrefix(cmd.Program, "/"):
		c.absPath(specField(cp, "program"), cmd.Program)
	case len(cmd.Program) > 255 || !bareProgRE.MatchString(cmd.Program):
		c.add(specField(cp, "program"), "must be an absolute path (/usr/bin/tool) or a bare program name (tool); it runs without a shell")
	}
	if len(cmd.Args) > MaxArgs {
		c.add(specField(cp, "args"), "must have at most %d arguments", MaxArgs)
	}
	for i, a := range cmd.Args {
		if len(a) > MaxArgLen {
			c.add(specIndex(specField(cp, "args"), i), "must be at most %d bytes", MaxArgLen)
		}
	}
	c.enum(specField(cp, "format"), cmd.Format, commandFormats)
	if o := cmd.OutputFile; o != "" {
		if len(o) > 255 || o == "." || !fs.ValidPath(o) || strings.ContainsAny(o, "\\\n\t") {
			c.add(specField(cp, "output_file"), "must be a path inside the step's folder, like result.json (no leading /, no ..)")
		}
	}
}

func validateFault(c *specChecker, fp string, p ProfileSpec, i int, f *FaultStep, names map[string]int) {
	c.enum(specField(fp, "action"), f.Action, faultActions)
	notFor := func(field string, set bool) {
		if set {
			c.add(specField(fp, field), "does not apply to a %s fault", f.Action)
		}
	}
	needInterface := func() {
		if f.Interface == "" {
			c.add(specField(fp, "interface"), "is required: the network interface, like eth0")
		} else if !interfaceRE.MatchString(f.Interface) {
			c.add(specField(fp, "interface"), "must be a network interface name (up to 15 letters, digits, ., - or _)")
		}
	}
	switch f.Action {
	case FaultNetem:
		needInterface()
		if f.Delay < 0 || f.Delay > MaxFaultDelay {
			c.add(specField(fp, "delay"), "must be between 0 and 1m")
		}
		if c.finite(specField(fp, "loss_percent"), f.LossPercent) && (f.LossPercent < 0 || f.LossPercent > 100) {
			c.add(specField(fp, "loss_percent"), "must be between 0 and 100")
		}
		if f.Delay == 0 && f.LossPercent == 0 {
			c.add(specField(fp, "delay"), "set a delay, a loss_percent, or both")
		}
		notFor("rate_mbit", f.RateMbit != 0)
		notFor("controller", f.Controller != "")
	case FaultRateLimit:
		needInterface()
		if c.finite(specField(fp, "rate_mbit"), f.RateMbit) && (f.RateMbit <= 0 || f.RateMbit > MaxRateMbit) {
			c.add(specField(fp, "rate_mbit"), "must be more than 0 and at most %g megabits per second", float64(MaxRateMbit))
		}
		notFor("delay", f.Delay != 0)
		notFor("loss_percent", f.LossPercent != 0)
		notFor("controller", f.Controller != "")
	case FaultPathDown:
		if f.Controller == "" {
			c.add(specField(fp, "controller"), "is required: the NVMe controller to disconnect, like nvme1")
		} else if !controllerRE.MatchString(f.Controller) {
			c.add(specField(fp, "controller"), "must be an NVMe controller name, like nvme1")
		}
		notFor("interface", f.Interface != "")
		notFor("delay", f.Delay != 0)
		notFor("loss_percent", f.LossPercent != 0)
		notFor("rate_mbit", f.RateMbit != 0)
	}
	c.duration(specField(fp, "duration"), f.Duration, true)
	c.duration(specField(fp, "after"), f.After, false)
	if f.During == "" {
		if f.After != 0 {
			c.add(specField(fp, "after"), "only applies with during")
		}
		return
	}
	j, ok := names[f.During]
	switch {
	case !ok:
		c.add(specField(fp, "during"), "names no step of this profile (%q)", f.During)
	case j <= i:
		c.add(specField(fp, "during"), "must name a later step: %q comes before this fault", f.During)
	case !IsLoadStep(p.Steps[j].Kind):
		c.add(specField(fp, "during"), "must name a load step (fio, inference or command), not a %s step", p.Steps[j].Kind)
	}
}

// ValidateGateSet checks a gate set after filling its defaults, and returns
// every problem found (nil when there is none).
func ValidateGateSet(spec GateSetSpec) ValidationErrors {
	g := spec.Normalized()
	c := &specChecker{}
	checkText(c, reflect.ValueOf(g), "")
	if g.SchemaVersion < 1 || g.SchemaVersion > GateSchemaVersion {
		c.add("schema_version", "must be between 1 and %d", GateSchemaVersion)
	}
	c.title("name", g.Name)
	c.maxLen("description", g.Description, MaxDescriptionLen)
	c.enum("correction", g.Correction, corrections)
	c.intRange("stop_loss_consecutive", g.StopLossConsecutive, 1, 100)
	switch {
	case len(g.Criteria) == 0:
		c.add("criteria", "a gate set needs at least one criterion")
	case len(g.Criteria) > MaxCriteria:
		c.add("criteria", "must have at most %d criteria", MaxCriteria)
	}
	first := map[string]int{}
	for i, cr := range g.Criteria {
		if j, dup := first[cr.Name]; dup && cr.Name != "" {
			c.add(specIndex("criteria", i)+".name", "%q is already the name of criteria[%d]; criterion names must be unique", cr.Name, j)
		} else {
			first[cr.Name] = i
		}
		validateCriterion(c, specIndex("criteria", i), cr)
	}
	return c.result()
}

// Validate reports the gate set's problems as ValidationErrors, or nil.
func (g GateSetSpec) Validate() error {
	if errs := ValidateGateSet(g); errs != nil {
		return errs
	}
	return nil
}

func validateCriterion(c *specChecker, cp string, cr Criterion) {
	c.safeName(specField(cp, "name"), cr.Name, "criterion")
	m, known := LookupMetric(cr.Metric)
	switch {
	case cr.Metric == "":
		c.add(specField(cp, "metric"), "is required: a metric id such as ttft or read_iops")
	case !known:
		c.add(specField(cp, "metric"), "%q is not a metric Accord knows (see the metric catalog)", cr.Metric)
	}
	switch {
	case cr.Statistic == "":
		c.add(specField(cp, "statistic"), "is required: one of %s", statList())
	case !cr.Statistic.Valid():
		c.add(specField(cp, "statistic"), "%q is not allowed: use one of %s", cr.Statistic, statList())
	case known && !cr.Statistic.AppliesTo(m):
		if m.Kind == KindRate {
			c.add(specField(cp, "statistic"), "%s has one value per repetition, so only rate applies, not %s", m.ID, cr.Statistic)
		} else {
			c.add(specField(cp, "statistic"), "rate applies only to throughput and ratio metrics; %s is a distribution: use a percentile, mean or max", m.ID)
		}
	}
	c.enum(specField(cp, "mode"), string(cr.Mode), modes)
	if cr.Step != "" {
		c.safeName(specField(cp, "step"), cr.Step, "step")
	}
	c.enum(specField(cp, "comparator"), string(cr.Comparator), comparators)
	if cr.Confidence <= 0.5 || cr.Confidence > 0.9999 || math.IsNaN(cr.Confidence) {
		c.add(specField(cp, "confidence"), "must be more than 0.5 and at most 0.9999 (0.95 is usual)")
	}
	c.intRange(specField(cp, "min_samples"), cr.MinSamples, 0, MaxMinSamples)
	if _, isQ := cr.Statistic.Quantile(); cr.PointEstimate && !isQ && cr.Statistic != StatMean && cr.Statistic.Valid() {
		c.add(specField(cp, "point_estimate"), "applies to percentile and mean criteria only (a tool's summary gives %s no interval either way)", cr.Statistic)
	}
	c.enum(specField(cp, "severity"), string(cr.Severity), severities)
	c.maxLen(specField(cp, "help"), cr.Help, MaxHelpLen)

	thresholdOK := c.finite(specField(cp, "threshold"), cr.Threshold)
	stopOK := cr.StopLoss == nil || c.finite(specField(cp, "stop_loss"), *cr.StopLoss)
	if !known {
		return
	}
	validateWithinRun(c, cp, cr, m)
	unitOK := false
	switch cr.Mode {
	case Relative, Isolation, Drift:
		if cr.Unit != "%" {
			c.add(specField(cp, "unit"), "a relative threshold is a change in percent: use %%")
		} else {
			unitOK = true
		}
	case Absolute:
		if _, err := ConvertToCanonical(1, cr.Unit, m); err != nil {
			c.add(specField(cp, "unit"), "%s", unitMessage(cr.Unit, m))
		} else {
			unitOK = true
		}
	}
	if !unitOK {
		return
	}
	if thresholdOK {
		thresholdOK = checkLimit(c, specField(cp, "threshold"), cr, m, cr.Threshold)
	}
	if cr.StopLoss != nil && stopOK && checkLimit(c, specField(cp, "stop_loss"), cr, m, *cr.StopLoss) && thresholdOK {
		s := *cr.StopLoss
		switch cr.Comparator {
		case LessOrEqual:
			if s <= cr.Threshold {
				c.add(specField(cp, "stop_loss"), "must be above the threshold (%g): the criterion fails above it, and the stop-loss line is further on that side", cr.Threshold)
			}
		case GreaterOrEqual:
			if s >= cr.Threshold {
				c.add(specField(cp, "stop_loss"), "must be below the threshold (%g): the criterion fails below it, and the stop-loss line is further on that side", cr.Threshold)
			}
		}
	}
}

// checkLimit checks that a threshold or stop-loss value is sane for the
// metric, once converted.
func checkLimit(c *specChecker, p string, cr Criterion, m Metric, v float64) bool {
	if cr.Mode.ComparesTwo() {
		if v <= -100 || v > MaxRelativePct {
			c.add(p, "a relative change must be more than -100 %% and at most +%d %%", MaxRelativePct)
			return false
		}
		return true
	}
	canon, err := ConvertToCanonical(v, cr.Unit, m)
	if err != nil {
		c.add(p, "%s", err.Error())
		return false
	}
	switch {
	case canon < 0:
		c.add(p, "must not be negative")
	case m.Unit == UnitRatio && canon > 1:
		c.add(p, "%s is a share: at most 1 (or 100 %%)", m.ID)
	case m.Unit == UnitPercent && canon > 100:
		c.add(p, "%s is a percentage: at most 100 %%", m.ID)
	default:
		return true
	}
	return false
}

func unitMessage(unit string, m Metric) string {
	if unit == "" {
		return fmt.Sprintf("is required: one of %s", strings.Join(UnitsFor(m), ", "))
	}
	return fmt.Sprintf("%q cannot express %s (%s): use one of %s", unit, m.ID, m.Unit, strings.Join(UnitsFor(m), ", "))
}

func statList() string {
	s := make([]string, len(Statistics))
	for i, st := range Statistics {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}

// ValidateGateSetForProfile checks what needs both specs: each criterion's
// step exists in the profile and produces the criterion's metric, and a
// criterion without a step has at least one step to judge.
func ValidateGateSetForProfile(gates GateSetSpec, profile ProfileSpec) ValidationErrors {
	c := &specChecker{}
	p := profile.Normalized()
	for i, cr := range gates.Criteria {
		cp := specIndex("criteria", i)
		if _, ok := LookupMetric(cr.Metric); !ok {
			continue // ValidateGateSet reports it
		}
		if cr.Mode == Isolation {
			validateIsolationSteps(c, cp, cr, p)
			continue
		}
		if cr.Mode == Drift {
			validateDriftSteps(c, cp, cr, p)
			continue
		}
		if RunProduces(cr.Metric) {
			if cr.Step != "" {
				c.add(specField(cp, "step"), "%s is measured over the whole run, not by a step: leave step empty", cr.Metric)
			}
			continue
		}
		if cr.Step != "" {
			j := indexOfStep(p, cr.Step)
			switch {
			case j < 0:
				c.add(specField(cp, "step"), "the profile %q has no step named %q", p.Name, cr.Step)
			case !StepProduces(p.Steps[j], cr.Metric):
				c.add(specField(cp, "step"), "step %q (%s) does not produce %s", cr.Step, p.Steps[j].Kind, cr.Metric)
			}
			continue
		}
		found := false
		for _, s := range p.Steps {
			if StepProduces(s, cr.Metric) {
				found = true
				break
			}
		}
		if !found {
			c.add(specField(cp, "metric"), "no step of the profile %q produces %s", p.Name, cr.Metric)
		}
	}
	return c.result()
}
