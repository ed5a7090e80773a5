package load

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// GRPCOptions configures the gRPC unary driver. Zero fields get defaults.
type GRPCOptions struct {
	// Arrivals, when open, sends the calls on a clock (open-loop load).
	Arrivals Arrivals
	Addr     string
	Method   string // package.Service/Method
	Data     []byte // the request message as JSON (protojson); empty is the empty message
	// Headers are sent as metadata with every call.
	Headers map[string]string
	Conns   int // connections, one call at a time each; default 8
	// Files resolves the method when set (from -proto-file); otherwise
	// the server's reflection service does.
	Files Resolver
}

// Resolver finds a service's descriptor by its full name.
type Resolver interface {
	FindDescriptorByName(protoreflect.FullName) (protoreflect.Descriptor, error)
}

// GRPC drives one unary method: each worker keeps one connection and
// makes one call at a time. The request is built from JSON once, through
// the method's descriptor, and sent as those bytes on every call; a call
// succeeds when its status is OK (the reply is not decoded).
type GRPC struct {
	opt    GRPCOptions
	method string // /package.Service/Method
	req    rawMessage
	md     metadata.MD
	conns  []*grpc.ClientConn
	workers
}

// rawMessage is a message already encoded; rawCodec sends it as it is and
// reads replies into nothing.
type rawMessage []byte

type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	if m, ok := v.(*rawMessage); ok {
		return *m, nil
	}
	return nil, fmt.Errorf("load: raw codec cannot marshal %T", v)
}

func (rawCodec) Unmarshal([]byte, any) error { return nil }
func (rawCodec) Name() string                { return "proto" }

// NewGRPC resolves the method (through the server's reflection service
// unless opt.Files is set), builds the request from opt.Data and dials
// the connections. Each error says what was wrong before any load: an
// unknown method, JSON that does not match the request message, a server
// that does not speak gRPC.
func NewGRPC(ctx context.Context, opt GRPCOptions) (*GRPC, error) {
	opt, method, req, err := grpcRequest(ctx, opt)
	if err != nil {
		return nil, err
	}
	d := &GRPC{opt: opt, method: method, req: req, md: metadata.New(opt.Headers)}
	d.workers.n, d.workers.step, d.workers.arrivals = opt.Conns, d.step, opt.Arrivals
	d.conns = make([]*grpc.ClientConn, opt.Conns)
	for i := range d.conns {
		if d.conns[i], err = d.dial(); err != nil {
			d.Close()
			return nil, err
		}
	}
	return d, nil
}

// grpcRequest checks opt and fills its defaults, resolves the method and
// encodes the request once: what both gRPC drivers send.
func grpcRequest(ctx context.Context, opt GRPCOptions) (GRPCOptions, string, []byte, error) {
	if opt.Addr == "" {
		return opt, "", nil, errors.New("load: no address")
	}
	if opt.Conns <= 0 {
		opt.Conns = 8
	}
	svc, m, ok := strings.Cut(strings.TrimPrefix(opt.Method, "/"), "/")
	if !ok || svc == "" || m == "" || strings.Contains(m, "/") {
		return opt, "", nil, fmt.Errorf("load: -method %q: want package.Service/Method", opt.Method)
	}
	files := opt.Files
	if files == nil {
		var err error
		if files, err = reflectFiles(ctx, opt.Addr, svc); err != nil {
			return opt, "", nil, err
		}
	}
	in, err := methodInput(files, svc, m)
	if err != nil {
		return opt, "", nil, err
	}
	msg := dynamicpb.NewMessage(in)
	if len(opt.Data) > 0 {
		if err := protojson.Unmarshal(opt.Data, msg); err != nil {
			return opt, "", nil, fmt.Errorf("load: -data does not match %s: %w", in.FullName(), err)
		}
	}
	b, err := proto.Marshal(msg)
	if err != nil {
		return opt, "", nil, fmt.Errorf("load: encoding the request: %w", err)
	}
	return opt, "/" + svc + "/" + m, b, nil
}

func (d *GRPC) dial() (*grpc.ClientConn, error) {
	c, err := grpc.NewClient(d.opt.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	d.dials.Add(1)
	return c, nil
}

// methodInput finds the request message of svc's method m.
func methodInput(files Resolver, svc, m string) (protoreflect.MessageDescriptor, error) {
	desc, err := files.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, fmt.Errorf("load: service %s: %w", svc, err)
	}
	sd, ok := desc.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, fmt.Errorf("load: %s is a %T, not a service", svc, desc)
	}
	md := sd.Methods().ByName(protoreflect.Name(m))
	if md == nil {
		var names []string
		for i := range sd.Methods().Len() {
			names = append(names, string(sd.Methods().Get(i).Name()))
		}
		return nil, fmt.Errorf("load: service %s has no method %s (it has %s)", svc, m, strings.Join(names, ", "))
	}
	if md.IsStreamingClient() || md.IsStreamingServer() {
		return nil, fmt.Errorf("load: %s/%s streams: the gRPC driver makes unary calls only", svc, m)
	}
	return md.Input(), nil
}

// Close closes the connections.
func (d *GRPC) Close() error {
	for _, c := range d.conns {
		if c != nil {
			c.Close()
		}
	}
	return nil
}

// step is one call of worker i; a status other than OK is a Non2xx.
func (d *GRPC) step(ctx context.Context) func(i int, r *Result) {
	var reply rawMessage
	return countedStep(ctx, func(ctx context.Context, i int) error {
		if len(d.md) > 0 {
			ctx = metadata.NewOutgoingContext(ctx, d.md)
		}
		err := d.conns[i].Invoke(ctx, d.method, &d.req, &reply)
		if s, ok := status.FromError(err); ok && err != nil && s.Code() != codes.Canceled && s.Code() != codes.Unavailable {
			return grpcStatusError{s}
		}
		return err
	})
}

// grpcStatusError is a call the server answered with a status other than
// OK: counted as a Non2xx.
type grpcStatusError struct{ s *status.Status }

func (e grpcStatusError) Error() string {
	return "grpc status " + e.s.Code().String() + ": " + e.s.Message()
}

func (grpcStatusError) answered() {}
