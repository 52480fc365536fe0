// Package web holds Accord's templ components: the layout, one file per
// page, shared components and the chart option builders. Components take
// typed values (store and acceptance types, or small view structs here);
// they never query anything themselves.
package web

// Viewer is the signed-in user as pages show them.
type Viewer struct {
	ID      int64
	Name    string
	Email   string
	IsAdmin bool
	OrgName string
	OrgKind string // vendor, customer or "" for an admin without organisation
}

// Flash is a one-line message shown at the top of a page.
type Flash struct {
	Kind string // ok, error, info, warn
	Text string
}

// Crumb is one step of the breadcrumb trail.
type Crumb struct {
	Label string
	Href  string
}

// Page is what the layout needs from every handler.
type Page struct {
	Title  string
	Viewer *Viewer // nil when signed out
	Nav    string  // the active top-level section: home, programs, help, admin
	Crumbs []Crumb
	Flash  []Flash
	Dev    bool
}
