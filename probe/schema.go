package probe

import "github.com/perfspy/perfspy/schema"

// The JSON contracts probe writes live in package schema, so that a
// user's program, probe review and internal/cost decode them without
// probe; these names keep probe's code and API as they were.
type (
	Summary            = schema.Summary
	TransferSummary    = schema.TransferSummary
	PerDatagram        = schema.PerDatagram
	WindowSummary      = schema.WindowSummary
	AttributionSummary = schema.AttributionSummary
	FloorSummary       = schema.FloorSummary
	DriverSummary      = schema.DriverSummary
	TailGroup          = schema.TailGroup
	WaitRow            = schema.WaitRow
	PerRequest         = schema.PerRequest
	RetainedSite       = schema.RetainedSite
	MachineSummary     = schema.MachineSummary
	Closure            = schema.Closure
	RequestsClosure    = schema.RequestsClosure
	AllocsClosure      = schema.AllocsClosure
	RouteSummary       = schema.RouteSummary
	RouteSite          = schema.RouteSite
	RoutesClosure      = schema.RoutesClosure
	GoroutinesLeft     = schema.GoroutinesLeft
	EndpointSummary    = schema.EndpointSummary
	MixSummary         = schema.MixSummary
	BenchSummary       = schema.BenchSummary
	BenchFigures       = schema.BenchFigures
	BenchPerOp         = schema.BenchPerOp
	BenchMem           = schema.BenchMem
	BenchGoTest        = schema.BenchGoTest
	ABMetric           = schema.ABMetric
	ABFunction         = schema.ABFunction
)
