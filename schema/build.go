package schema

// BuildCheck is the comparison of the measured binary's build list with the
// plain build's, as summary.json's "build" records it.
type BuildCheck struct {
	Binary  string         `json:"binary"`
	Mode    string         `json:"mode"`
	Modules int            `json:"modules"` // in the plain build
	Added   []Module       `json:"modules_added"`
	Changed []ModuleChange `json:"modules_changed"`
	Removed []Module       `json:"modules_removed,omitempty"`
}

// Modes of a build (BuildCheck.Mode): how the measured binary was built
// beside the target's own module.
const (
	ModeModule    = "module"
	ModeVendor    = "vendor"
	ModeWorkspace = "workspace"
	ModeSelf      = "self" // the target is in perfspy's own module
	// ModeTest is a test binary: nothing but standard-library overlays
	// is added, so the build list is the package's own.
	ModeTest = "test"
)

// ModuleChange is a module whose version (or replacement) differs.
type ModuleChange struct {
	Path   string `json:"path"`
	Plain  string `json:"plain"`
	Probed string `json:"probed"`
}

// Module is one module of a build list, as `go version -m` shows it.
type Module struct {
	Path    string `json:"path"`
	Version string `json:"version"`
	// Replace is the replacement ("path version", or a folder), "" if none.
	Replace string `json:"replace,omitempty"`
}

func (m Module) String() string {
	s := m.Path + "@" + m.Version
	if m.Replace != "" {
		s += " => " + m.Replace
	}
	return s
}
