package probe

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
)

// defaultInterim is how often interim metrics and progress are emitted when
// the plan does not say.
const defaultInterim = 2 * time.Second

// loadPlan reads and validates DIR/plan.json.
func loadPlan(dir string) (*wire.Plan, error) {
	b, err := os.ReadFile(filepath.Join(dir, wire.PlanFile))
	if err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	var p wire.Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("parse plan %s: %w", wire.PlanFile, err)
	}
	if err := validatePlan(&p); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	return &p, nil
}

var stepNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// validatePlan checks everything the probe relies on. The server validates
// profiles too; the probe checks again because it is the one acting on them.
func validatePlan(p *wire.Plan) error {
	if p.SchemaVersion != wire.PlanSchemaVersion {
		return fmt.Errorf("schema_version %d is not supported (this probe reads %d)", p.SchemaVersion, wire.PlanSchemaVersion)
	}
	if p.Profile.Repetitions < 0 || p.Profile.Repetitions > 1000 {
		return fmt.Errorf("repetitions %d out of range 1..1000", p.Profile.Repetitions)
	}
	if len(p.Profile.Steps) == 0 {
		return errors.New("profile has no steps")
	}
	if len(p.Profile.Steps) > 99 {
		return fmt.Errorf("profile has %d steps, at most 99", len(p.Profile.Steps))
	}
	if p.Role != "" {
		if _, ok := p.Profile.Role(p.Role); !ok {
			return fmt.Errorf("role %q is not a role of the profile", p.Role)
		}
	}
	index := map[string]int{}
	for i, s := range p.Profile.Steps {
		if !stepNameRE.MatchString(s.Name) {
			return fmt.Errorf("step %d: name %q must be 1-64 letters, digits, '.', '_' or '-'", i+1, s.Name)
		}
		if _, dup := index[s.Name]; dup {
			return fmt.Errorf("step %d: name %q is used twice", i+1, s.Name)
		}
		index[s.Name] = i
	}
	for i, s := range p.Profile.Steps {
		if err := validateStep(s, p.Profile.Warmup.D()); err != nil {
			return fmt.Errorf("step %d (%s): %w", i+1, s.Name, err)
		}
		if s.Kind == acceptance.StepFault && s.Fault.During != "" {
			j, ok := index[s.Fault.During]
			if !ok {
				return fmt.Errorf("step %d (%s): during names no step %q", i+1, s.Name, s.Fault.During)
			}
			if j <= i {
				return fmt.Errorf("step %d (%s): during must name a later step, %q comes before", i+1, s.Name, s.Fault.During)
			}
			if k := p.Profile.Steps[j].Kind; k == acceptance.StepFault || k == acceptance.StepPause || k == acceptance.StepDropCaches {
				return fmt.Errorf("step %d (%s): during must name a load step, %q is a %s step", i+1, s.Name, s.Fault.During, k)
			}
		}
	}
	return nil
}

func validateStep(s acceptance.StepSpec, warmup time.Duration) error {
	set := 0
	for _, p := range []bool{s.Fio != nil, s.Inference != nil, s.Command != nil, s.Pause != nil, s.Fault != nil, s.GPUPath != nil} {
		if p {
			set++
		}
	}
	want := 1
	if s.Kind == acceptance.StepDropCaches {
		want = 0
	}
	if set != want {
		return fmt.Errorf("kind %s needs exactly its own parameters (found %d parameter blocks)", s.Kind, set)
	}
	switch s.Kind {
	case acceptance.StepFio:
		if s.Fio == nil {
			return errors.New("fio step without fio parameters")
		}
		return validateFio(s.Fio)
	case acceptance.StepInference:
		if s.Inference == nil {
			return errors.New("inference step without inference parameters")
		}
		return validateInference(s.Inference)
	case acceptance.StepCommand:
		if s.Command == nil {
			return errors.New("command step without command parameters")
		}
		return validateCommand(s.Command)
	case acceptance.StepDropCaches:
		return nil
	case acceptance.StepPause:
		if s.Pause == nil || s.Pause.Duration <= 0 {
			return errors.New("pause needs a positive duration")
		}
		return nil
	case acceptance.StepFault:
		if s.Fault == nil {
			return errors.New("fault step without fault parameters")
		}
		return validateFault(s.Fault)
	case acceptance.StepGPUPath:
		if s.GPUPath == nil {
			return errors.New("gpu-path step without gpu_path parameters")
		}
		return validateGPUPath(s.GPUPath)
	default:
		return fmt.Errorf("unknown step kind %q", s.Kind)
	}
}

func validateInference(s *acceptance.InferenceStep) error {
	if !strings.HasPrefix(s.Endpoint, "http://") && !strings.HasPrefix(s.Endpoint, "https://") {
		return fmt.Errorf("endpoint %q must be an http(s) URL", s.Endpoint)
	}
	if s.MetricsURL != "" && !strings.HasPrefix(s.MetricsURL, "http://") && !strings.HasPrefix(s.MetricsURL, "https://") {
		return fmt.Errorf("metrics_url %q must be an http(s) URL", s.MetricsURL)
	}
	if s.Duration <= 0 && s.Requests <= 0 {
		return errors.New("inference step needs a duration or a request count")
	}
	if _, err := inferenceLevels(s); err != nil {
		return err
	}
	return nil
}

func validateCommand(c *acceptance.CommandStep) error {
	if c.Program == "" || strings.ContainsAny(c.Program, "\x00\n") {
		return errors.New("command needs a program")
	}
	for _, a := range c.Args {
		if strings.ContainsRune(a, 0) {
			return errors.New("command argument contains a NUL byte")
		}
	}
	if c.OutputFile != "" {
		if filepath.IsAbs(c.OutputFile) || !filepath.IsLocal(c.OutputFile) {
			return fmt.Errorf("output_file %q must be a path inside the step folder", c.OutputFile)
		}
	}
	if formats := acceptance.CommandFormats(); !slices.Contains(formats, c.Format) {
		return fmt.Errorf("format %q is not one of %s", c.Format, strings.Join(formats, ", "))
	}
	return nil
}

// runTimeout is the limit of the whole run: the plan's, else the profile's,
// else the sum of every step's limit (or twice its estimate) plus a margin.
func runTimeout(p *wire.Plan) time.Duration {
	if p.RunTimeout > 0 {
		return p.RunTimeout.D()
	}
	if p.Profile.RunTimeout > 0 {
		return p.Profile.RunTimeout.D()
	}
	var sum time.Duration
	for _, s := range p.Profile.Steps {
		if s.Timeout > 0 {
			sum += s.Timeout.D()
		} else {
			sum += 2*estimateStep(s, p.Profile.Warmup.D()) + 2*time.Minute
		}
	}
	return time.Duration(repetitions(p))*sum + 5*time.Minute
}

func repetitions(p *wire.Plan) int {
	if p.Profile.Repetitions < 1 {
		return 1
	}
	return p.Profile.Repetitions
}

func interimEvery(p *wire.Plan) time.Duration {
	if p.Interim > 0 {
		return max(p.Interim.D(), 200*time.Millisecond)
	}
	return defaultInterim
}

// estimateStep guesses how long one repetition of a step takes, for
// progress and the default run timeout.
func estimateStep(s acceptance.StepSpec, warmup time.Duration) time.Duration {
	switch s.Kind {
	case acceptance.StepFio:
		return warmup + s.Fio.Runtime.D()
	case acceptance.StepInference:
		levels, _ := inferenceLevels(s.Inference)
		per := s.Inference.Duration.D()
		if per == 0 {
			per = time.Minute
		}
		return time.Duration(max(len(levels), 1)) * (warmup + per)
	case acceptance.StepPause:
		return s.Pause.Duration.D()
	case acceptance.StepFault:
		if s.Fault.During != "" {
			return 0
		}
		return s.Fault.Duration.D()
	case acceptance.StepDropCaches:
		return time.Second
	case acceptance.StepGPUPath:
		// Each path reads Size; 1 GiB/s is a pessimistic guess per path.
		return 3 * time.Duration(float64(s.GPUPath.Size)/(1<<30)*float64(time.Second))
	default:
		if s.Timeout > 0 {
			return s.Timeout.D() / 2
		}
		return 10 * time.Second
	}
}

// stepDirName is out/<NN>-<step>.
func stepDirName(index int, name string) string {
	return fmt.Sprintf("%02d-%s", index+1, name)
}
