// Package profstore sends probe's profiles to a Pyroscope server and
// reads selections of them back, per request.
//
// A store merges the profiles of many pushes, which would lose each
// run's request count. So every profile pushed carries one more sample
// type, requests/count, whose one sample (on a root frame of its own,
// perfspy.requests) holds the run's requests: merged, it is the requests
// of every run in the selection, and Fetch divides by it.
//
// The client side is the server's public HTTP API: POST /ingest with a
// raw pprof body, and the Connect API (querier.v1.QuerierService:
// ProfileTypes in JSON, SelectMergeProfile in protobuf, whose answer is
// a pprof profile).
package profstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/pprof/profile"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/perfspy/perfspy/profkey"
)

// RequestsType is the sample type that carries a profile's requests.
const RequestsType = "requests"

// RequestsFrame is the root frame of the requests' sample.
const RequestsFrame = "perfspy.requests"

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
// 0 in every sample, and one sample on RequestsFrame holding n.
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
	fn := &profile.Function{ID: fid + 1, Name: RequestsFrame, SystemName: RequestsFrame}
	loc := &profile.Location{ID: lid + 1, Line: []profile.Line{{Function: fn}}}
	q.Function, q.Location = append(q.Function, fn), append(q.Location, loc)
	vals := make([]int64, len(q.SampleType))
	vals[len(vals)-1] = n
	q.Sample = append(q.Sample, &profile.Sample{Location: []*profile.Location{loc}, Value: vals})
	return q
}

// Upload is one profile to push: the server, the service and labels it
// goes under, the requests it holds and the time it covers.
type Upload struct {
	Base        string // http://HOST:PORT
	Service     string
	Labels      map[string]string
	Requests    int64
	From, Until time.Time
}

// Push sends p, with its requests, as u says: one POST /ingest of the raw
// (not gzipped) pprof body. An error says what the server answered.
func Push(ctx context.Context, u Upload, p *profile.Profile) error {
	base, service, labels, from, until := u.Base, u.Service, u.Labels, u.From, u.Until
	var body bytes.Buffer
	if err := WithRequests(p, u.Requests).WriteUncompressed(&body); err != nil {
		return err
	}
	var parts []string
	for _, k := range sortedKeys(labels) {
		v := strings.NewReplacer(`\`, `\\`, `"`, `\"`, ",", "_", "}", "_").Replace(labels[k])
		parts = append(parts, LabelName(k)+"="+v)
	}
	q := url.Values{}
	q.Set("name", ServiceName(service)+"{"+strings.Join(parts, ",")+"}")
	q.Set("from", strconv.FormatInt(from.Unix(), 10))
	q.Set("until", strconv.FormatInt(until.Unix(), 10))
	q.Set("format", "pprof")
	req, err := http.NewRequestWithContext(ctx, "POST", strings.TrimSuffix(base, "/")+"/ingest?"+q.Encode(), &body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	return do(req, nil)
}

// do sends req and reads a 2xx answer into out; otherwise the error
// holds the server's message.
func do(req *http.Request, out *[]byte) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, strings.TrimSpace(string(b)))
	}
	if out != nil {
		*out = b
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	k := make([]string, 0, len(m))
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}

// Selection is a store address:
//
//	pyroscope://HOST:PORT/{service_name="x",commit="abc"}?from=-7d&type=alloc_objects
//
// from and until are times relative to now (-7d, -2h, -30m, 0) or Unix
// seconds; from defaults to -1h, until to now; type is the sample type.
type Selection struct {
	Base     string // http://HOST:PORT
	Selector string
	Type     string
	From     time.Time
	Until    time.Time
}

// IsSelection tells a store address from a file name.
func IsSelection(s string) bool { return strings.HasPrefix(s, "pyroscope://") }

// ParseSelection reads a store address.
func ParseSelection(s string, now time.Time) (*Selection, error) {
	rest, ok := strings.CutPrefix(s, "pyroscope://")
	if !ok {
		return nil, fmt.Errorf("%q: want pyroscope://HOST:PORT/{selector}?type=TYPE", s)
	}
	hostPart, query, _ := strings.Cut(rest, "?")
	host, selector, _ := strings.Cut(hostPart, "/")
	if host == "" || !strings.HasPrefix(selector, "{") || !strings.HasSuffix(selector, "}") {
		return nil, fmt.Errorf("%q: want pyroscope://HOST:PORT/{label=\"value\"}?type=TYPE", s)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", s, err)
	}
	sel := &Selection{Base: "http://" + host, Selector: selector, Type: q.Get("type"), Until: now}
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
func profileTypes(ctx context.Context, sel *Selection) ([]string, error) {
	body, _ := json.Marshal(map[string]string{"start": strconv.FormatInt(sel.From.UnixMilli(), 10), "end": strconv.FormatInt(sel.Until.UnixMilli(), 10)})
	req, err := http.NewRequestWithContext(ctx, "POST", sel.Base+"/querier.v1.QuerierService/ProfileTypes", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	var b []byte
	if err := do(req, &b); err != nil {
		return nil, err
	}
	var resp struct {
		ProfileTypes []struct {
			ID string `json:"ID"`
		} `json:"profileTypes"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return nil, fmt.Errorf("%s: ProfileTypes: %w", sel.Base, err)
	}
	var out []string
	for _, t := range resp.ProfileTypes {
		out = append(out, t.ID)
	}
	sort.Strings(out)
	return out, nil
}

// typeIDs picks the profile type of sample type want, and the requests
// type pushed beside it (the same name and period).
func typeIDs(types []string, want string) (typeID, reqID string, ok bool) {
	want = strings.ReplaceAll(want, "-", "_")
	for _, id := range types {
		f := strings.Split(id, ":")
		if len(f) == 5 && f[1] == want {
			typeID, ok = id, true
			reqID = strings.Join([]string{f[0], RequestsType, "count", f[3], f[4]}, ":")
			break
		}
	}
	return typeID, reqID, ok
}

func sampleTypes(types []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range types {
		if f := strings.Split(id, ":"); len(f) == 5 && !seen[f[1]] && f[1] != RequestsType {
			seen[f[1]] = true
			out = append(out, f[1])
		}
	}
	sort.Strings(out)
	return out
}

// selectMerge asks for the merged profile of a type over the selection.
func selectMerge(ctx context.Context, sel *Selection, typeID string) (*profile.Profile, error) {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, typeID)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, sel.Selector)
	b = protowire.AppendTag(b, 3, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(sel.From.UnixMilli()))
	b = protowire.AppendTag(b, 4, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(sel.Until.UnixMilli()))
	req, err := http.NewRequestWithContext(ctx, "POST", sel.Base+"/querier.v1.QuerierService/SelectMergeProfile", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/proto")
	var out []byte
	if err := do(req, &out); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return &profile.Profile{}, nil
	}
	return profile.ParseData(out)
}

// Fetch reads the selection's merged profile of its type and its merged
// request count, which it puts in the profile's perfspy.requests comment
// (as a run's profile carries it), so that allocdiff and flame divide by
// it. A selection that matches nothing is an error.
func Fetch(ctx context.Context, sel *Selection) (*profile.Profile, error) {
	types, err := profileTypes(ctx, sel)
	if err != nil {
		return nil, err
	}
	if sel.Type == "" {
		return nil, fmt.Errorf("%s: no type= in the address (the store has %s)", sel.Selector, strings.Join(sampleTypes(types), ", "))
	}
	typeID, reqID, ok := typeIDs(types, sel.Type)
	if !ok {
		return nil, fmt.Errorf("%s has no profiles of type %s in that time (it has %s)", sel.Base, sel.Type, strings.Join(sampleTypes(types), ", "))
	}
	p, err := selectMerge(ctx, sel, typeID)
	if err != nil {
		return nil, err
	}
	if len(p.Sample) == 0 {
		return nil, fmt.Errorf("%s %s: no profile matches the selection (type %s)", sel.Base, sel.Selector, sel.Type)
	}
	var requests int64
	if slices.Contains(types, reqID) {
		rp, err := selectMerge(ctx, sel, reqID)
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
	return p, nil
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
