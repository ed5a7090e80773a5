// Package profstore sends probe's profiles to a Pyroscope server and
// reads selections of them back, per request.
//
// A store merges the profiles of many pushes, which would lose each
// run's request count. So every profile pushed carries one more sample
// type, requests/count, whose one sample (on a root frame of its own,
// perfspy.requests) holds the run's requests: merged, it is the requests
// of every run in the selection, and Fetch divides by it.
//
// Each kind of profile goes under a name of its own (the store's
// __name__: process_cpu, memory, perfspy_syscalls, ...): the store keys a
// series by name, sample type and period type, and the legacy /ingest
// endpoint names profiles by their sample types, which puts Go's block
// and mutex profiles, or two off-CPU profiles, in one series.
//
// The client side is the server's public Connect API, through the
// Apache-2.0 module github.com/grafana/pyroscope/api: push.v1.PusherService
// (Push), querier.v1.QuerierService (ProfileTypes, SelectMergeProfile).
package profstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/google/pprof/profile"
	pushv1 "github.com/grafana/pyroscope/api/gen/proto/go/push/v1"
	"github.com/grafana/pyroscope/api/gen/proto/go/push/v1/pushv1connect"
	querierv1 "github.com/grafana/pyroscope/api/gen/proto/go/querier/v1"
	"github.com/grafana/pyroscope/api/gen/proto/go/querier/v1/querierv1connect"
	typesv1 "github.com/grafana/pyroscope/api/gen/proto/go/types/v1"
	"google.golang.org/protobuf/proto"

	"github.com/perfspy/perfspy/agent/storeaccess"
	"github.com/perfspy/perfspy/profkey"
)

// RequestsType is the sample type that carries a profile's requests.
const RequestsType = "requests"

// RequestsFrame is the root frame of the requests' sample.
const RequestsFrame = "perfspy.requests"

// NoStackFrame is the frame pushed for samples without a stack (off-CPU
// waits of goroutines the trace saw without one).
const NoStackFrame = "[no stack]"

var badLabel = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// LabelName makes a label name the server takes: letters, digits and _,
// not starting with a digit.
func LabelName(s string) string {
	s = badLabel.ReplaceAllString(s, "_")
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		s = "_" + s
	}
	return s
}

var badService = regexp.MustCompile(`[^a-zA-Z0-9._/-]`)

// ServiceName makes a service name the server takes (it refuses '@',
// spaces and the like): other characters become _.
func ServiceName(s string) string {
	if s = badService.ReplaceAllString(s, "_"); s == "" {
		return "_"
	}
	return s
}

// WithRequests returns a copy of p with the requests sample type added:
// 0 in every sample, and one sample on RequestsFrame holding n. The store
// drops samples without a stack, so those go under NoStackFrame.
func WithRequests(p *profile.Profile, n int64) *profile.Profile {
	q := p.Copy()
	for _, st := range q.SampleType {
		st.Type = strings.ReplaceAll(st.Type, "-", "_") // the server refuses '-' in sample type names
	}
	q.SampleType = append(q.SampleType, &profile.ValueType{Type: RequestsType, Unit: "count"})
	for _, s := range q.Sample {
		s.Value = append(s.Value, 0)
	}
	var fid, lid uint64
	for _, f := range q.Function {
		fid = max(fid, f.ID)
	}
	for _, l := range q.Location {
		lid = max(lid, l.ID)
	}
	root := func(name string) *profile.Location {
		fid, lid = fid+1, lid+1
		fn := &profile.Function{ID: fid, Name: name, SystemName: name}
		loc := &profile.Location{ID: lid, Line: []profile.Line{{Function: fn}}}
		q.Function, q.Location = append(q.Function, fn), append(q.Location, loc)
		return loc
	}
	var noStack *profile.Location
	for _, s := range q.Sample {
		if len(s.Location) == 0 {
			if noStack == nil {
				noStack = root(NoStackFrame)
			}
			s.Location = []*profile.Location{noStack}
		}
	}
	vals := make([]int64, len(q.SampleType))
	vals[len(vals)-1] = n
	q.Sample = append(q.Sample, &profile.Sample{Location: []*profile.Location{root(RequestsFrame)}, Value: vals})
	return q
}

// Upload is one profile to push: the server, the profile's name in the
// store, the service and labels it goes under, the requests it holds and
// the time it covers.
type Upload struct {
	Base        string // http://HOST:PORT
	Name        string // the store's __name__ (letters, digits and _)
	Service     string
	Labels      map[string]string
	Requests    int64
	From, Until time.Time
}

// Push sends p, with its requests, as u says: one push.v1 Push of the raw
// pprof body. An error says what the server answered.
// pushAnswerMax bounds what a push reads of the store's answer.
const pushAnswerMax = 1 << 20

func Push(ctx context.Context, a *storeaccess.Access, u Upload, p *profile.Profile) error {
	a = a.OrDefault()
	if err := a.Check(u.Base); err != nil {
		return err
	}
	q := WithRequests(p, u.Requests)
	q.TimeNanos, q.DurationNanos = u.From.UnixNano(), u.Until.Sub(u.From).Nanoseconds()
	var body strings.Builder
	if err := q.WriteUncompressed(&body); err != nil {
		return err
	}
	// __delta__=false: the profile is the window's own, not a running
	// total the server should take the difference of.
	labels := []*typesv1.LabelPair{{Name: "__name__", Value: LabelName(u.Name)}, {Name: "__delta__", Value: "false"},
		{Name: "service_name", Value: ServiceName(u.Service)}}
	for _, k := range slices.Sorted(maps.Keys(u.Labels)) {
		labels = append(labels, &typesv1.LabelPair{Name: LabelName(k), Value: u.Labels[k]})
	}
	req := &pushv1.PushRequest{Series: []*pushv1.RawProfileSeries{{Labels: labels, Samples: []*pushv1.RawSample{{RawProfile: []byte(body.String())}}}}}
	hc, err := a.Client()
	if err != nil {
		return err
	}
	// A push's answer is an empty message: an endless or a huge one is
	// cut at a mebibyte, not at the reads' -store-max-response.
	pa := *a
	pa.MaxResponse = min(max(pa.MaxResponse, 0), pushAnswerMax)
	if pa.MaxResponse == 0 {
		pa.MaxResponse = pushAnswerMax
	}
	_, err = pushv1connect.NewPusherServiceClient(hc, u.Base, options(&pa)...).Push(ctx, connect.NewRequest(req))
	return serverError(a, u.Base, "Push", err)
}

// serverError names the server and the call, the limit that ended it,
// and keeps what it answered.
func serverError(a *storeaccess.Access, base, call string, err error) error {
	if err == nil {
		return nil
	}
	base = Redact(base)
	var ce *connect.Error
	if errors.As(err, &ce) && ce.Code() != connect.CodeUnavailable && ce.Code() != connect.CodeResourceExhausted && ce.Code() != connect.CodeDeadlineExceeded {
		return fmt.Errorf("%s %s: %s: %s", base, call, ce.Code(), ce.Message())
	}
	return fmt.Errorf("%s %s: %w", base, call, callError(a, err))
}

// Selection is a store address:
//
//	pyroscope://HOST:PORT/{service_name="x",commit="abc"}?from=-7d&type=alloc_objects
//	pyroscope+https://HOST:PORT/{...}?type=...   (the store over TLS)
//
// from and until are times relative to now (-7d, -2h, -30m, 0) or Unix
// seconds; from defaults to -1h, until to now; type is the sample type.
type Selection struct {
	Base     string // http://HOST:PORT or https://HOST:PORT
	Selector string
	Type     string
	From     time.Time
	Until    time.Time
}

// IsSelection tells a store address from a file name.
func IsSelection(s string) bool {
	return strings.HasPrefix(s, "pyroscope://") || strings.HasPrefix(s, "pyroscope+https://")
}

// ParseSelection reads a store address. Credentials in it are refused:
// they come from the environment (Access).
func ParseSelection(raw string, now time.Time) (*Selection, error) {
	scheme, rest, ok := "http://", "", false
	if rest, ok = strings.CutPrefix(raw, "pyroscope+https://"); ok {
		scheme = "https://"
	} else if rest, ok = strings.CutPrefix(raw, "pyroscope://"); !ok {
		return nil, fmt.Errorf("%q: want pyroscope://HOST:PORT/{selector}?type=TYPE", Redact(raw))
	}
	s := Redact(raw)
	// The query follows the selector's closing brace: a selector's regular
	// expression may hold a '?' of its own.
	hostPart, query := rest, ""
	if i := strings.LastIndex(rest, "}"); i >= 0 {
		hostPart, query = rest[:i+1], rest[i+1:]
		if query != "" && query[0] != '?' {
			return nil, fmt.Errorf("%q: want pyroscope://HOST:PORT/{label=\"value\"}?type=TYPE", s)
		}
		query = strings.TrimPrefix(query, "?")
	}
	host, selector, _ := strings.Cut(hostPart, "/")
	if strings.Contains(host, "@") {
		return nil, fmt.Errorf("%q: credentials in the address are refused (ps and every error would show them): set %s or %s, or their _FILE forms", s, EnvBasic, EnvToken)
	}
	if host == "" || !strings.HasPrefix(selector, "{") || !strings.HasSuffix(selector, "}") {
		return nil, fmt.Errorf("%q: want pyroscope://HOST:PORT/{label=\"value\"}?type=TYPE", s)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", s, err)
	}
	sel := &Selection{Base: scheme + host, Selector: selector, Type: q.Get("type"), Until: now}
	if sel.From, err = parseTime(q.Get("from"), now, now.Add(-time.Hour)); err != nil {
		return nil, fmt.Errorf("%q: from: %w", s, err)
	}
	if sel.Until, err = parseTime(q.Get("until"), now, now); err != nil {
		return nil, fmt.Errorf("%q: until: %w", s, err)
	}
	return sel, nil
}

func parseTime(v string, now, def time.Time) (time.Time, error) {
	if v == "" {
		return def, nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
		return time.Unix(n, 0), nil
	}
	if v == "0" || v == "now" {
		return now, nil
	}
	unit := map[byte]time.Duration{'d': 24 * time.Hour, 'h': time.Hour, 'm': time.Minute, 's': time.Second}[v[len(v)-1]]
	n, err := strconv.Atoi(v[:len(v)-1])
	if unit == 0 || err != nil || n > 0 {
		return time.Time{}, fmt.Errorf("%q: want -7d, -2h, -30m, now or Unix seconds", v)
	}
	return now.Add(time.Duration(n) * unit), nil
}

// profileTypes lists the server's profile type IDs in the time range
// (name:sample_type:sample_unit:period_type:period_unit).
func profileTypes(ctx context.Context, a *storeaccess.Access, sel *Selection) ([]string, error) {
	qc, err := querier(a, sel)
	if err != nil {
		return nil, err
	}
	resp, err := qc.ProfileTypes(ctx,
		connect.NewRequest(&querierv1.ProfileTypesRequest{Start: sel.From.UnixMilli(), End: sel.Until.UnixMilli()}))
	if err != nil {
		return nil, serverError(a, sel.Base, "ProfileTypes", err)
	}
	var out []string
	for _, t := range resp.Msg.ProfileTypes {
		out = append(out, t.ID)
	}
	sort.Strings(out)
	return out, nil
}

// typeIDs picks the profile type of want, a sample type or
// NAME:SAMPLE_TYPE, and the requests type pushed beside it (the same
// name and period). A sample type that several names have is an error
// that lists them.
func typeIDs(types []string, want string) (typeID, reqID string, err error) {
	name, sample, named := strings.Cut(strings.ReplaceAll(want, "-", "_"), ":")
	if !named {
		name, sample = "", name
	}
	var found []string
	for _, id := range types {
		f := strings.Split(id, ":")
		if len(f) == 5 && f[1] == sample && (name == "" || f[0] == name) {
			found = append(found, id)
			typeID, reqID = id, strings.Join([]string{f[0], RequestsType, "count", f[3], f[4]}, ":")
		}
	}
	switch len(found) {
	case 0:
		return "", "", fmt.Errorf("no profiles of type %s in that time (it has %s)", want, strings.Join(sampleTypes(types), ", "))
	case 1:
		return typeID, reqID, nil
	}
	var names []string
	for _, id := range found {
		f := strings.Split(id, ":")
		names = append(names, f[0]+":"+f[1])
	}
	return "", "", fmt.Errorf("type %s is in several profiles: name one (type=%s)", want, strings.Join(names, " or type="))
}

// sampleTypes lists the types a selection can name, NAME:SAMPLE_TYPE.
func sampleTypes(types []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range types {
		if f := strings.Split(id, ":"); len(f) == 5 && !seen[f[0]+":"+f[1]] && f[1] != RequestsType {
			seen[f[0]+":"+f[1]] = true
			out = append(out, f[0]+":"+f[1])
		}
	}
	sort.Strings(out)
	return out
}

// selectMerge asks for the merged profile of a type over the selection.
func selectMerge(ctx context.Context, a *storeaccess.Access, sel *Selection, typeID string) (*profile.Profile, error) {
	qc, err := querier(a, sel)
	if err != nil {
		return nil, err
	}
	resp, err := qc.SelectMergeProfile(ctx,
		connect.NewRequest(&querierv1.SelectMergeProfileRequest{ProfileTypeID: typeID, LabelSelector: sel.Selector,
			Start: sel.From.UnixMilli(), End: sel.Until.UnixMilli()}))
	if err != nil {
		return nil, serverError(a, sel.Base, "SelectMergeProfile", err)
	}
	b, err := proto.Marshal(resp.Msg)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return &profile.Profile{}, nil
	}
	return profile.ParseData(b)
}

// Fetch reads the selection's merged profile of its type and its merged
// request count, which it puts in the profile's perfspy.requests comment
// (as a run's profile carries it), so that allocdiff and flame divide by
// it. A selection that matches nothing is an error.
func Fetch(ctx context.Context, a *storeaccess.Access, sel *Selection) (*profile.Profile, error) {
	a = a.OrDefault()
	if err := a.Check(sel.Base); err != nil {
		return nil, err
	}
	types, err := profileTypes(ctx, a, sel)
	if err != nil {
		return nil, err
	}
	if sel.Type == "" {
		return nil, fmt.Errorf("%s: no type= in the address (the store has %s)", sel.Selector, strings.Join(sampleTypes(types), ", "))
	}
	typeID, reqID, err := typeIDs(types, sel.Type)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sel.Base, err)
	}
	p, err := selectMerge(ctx, a, sel, typeID)
	if err != nil {
		return nil, err
	}
	if len(p.Sample) == 0 {
		return nil, fmt.Errorf("%s %s: no profile matches the selection (type %s)", sel.Base, sel.Selector, sel.Type)
	}
	var requests int64
	if slices.Contains(types, reqID) {
		rp, err := selectMerge(ctx, a, sel, reqID)
		if err != nil {
			return nil, err
		}
		for _, s := range rp.Sample {
			requests += s.Value[len(s.Value)-1]
		}
	}
	p.Sample = dropRequestsFrame(p.Sample)
	if requests > 0 {
		p.Comments = append(p.Comments, fmt.Sprintf("%s%d", profkey.RequestsComment, requests))
	}
	ungroup(p, typeID)
	return p, nil
}

// ungroup names the sample types of a live bill group's profile
// (perfspy_tail_allocs, perfspy_median_copies, ...: pushed as
// tail_alloc_objects, median_copied_bytes, so that a bare
// type=alloc_objects names one profile in the store) as the run's group
// profiles name them (alloc_objects, copied_bytes): allocdiff and flame
// -diff then compare the median group with the tail.
func ungroup(p *profile.Profile, typeID string) {
	name, _, _ := strings.Cut(typeID, ":")
	for _, g := range []string{"tail", "median"} {
		if !strings.HasPrefix(name, "perfspy_"+g+"_") {
			continue
		}
		for _, st := range p.SampleType {
			st.Type = strings.TrimPrefix(st.Type, g+"_")
		}
		p.DefaultSampleType = strings.TrimPrefix(p.DefaultSampleType, g+"_")
	}
}

// FetchAddress reads the profile at a store address (pyroscope://...),
// as Fetch does, each call within a's timeout: what allocdiff and flame
// open in place of a file.
func FetchAddress(ctx context.Context, a *storeaccess.Access, addr string) (*profile.Profile, error) {
	sel, err := ParseSelection(addr, time.Now())
	if err != nil {
		return nil, err
	}
	return Fetch(ctx, a, sel)
}

func querier(a *storeaccess.Access, sel *Selection) (querierv1connect.QuerierServiceClient, error) {
	hc, err := a.Client()
	if err != nil {
		return nil, err
	}
	return querierv1connect.NewQuerierServiceClient(hc, sel.Base, options(a)...), nil
}

// dropRequestsFrame leaves out the requests' own sample.
func dropRequestsFrame(samples []*profile.Sample) []*profile.Sample {
	out := samples[:0]
	for _, s := range samples {
		if len(s.Location) == 1 && len(s.Location[0].Line) == 1 && s.Location[0].Line[0].Function != nil && s.Location[0].Line[0].Function.Name == RequestsFrame {
			continue
		}
		out = append(out, s)
	}
	return out
}
