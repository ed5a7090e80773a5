// Command grpcecho is a gRPC server with one unary method,
// perfspy.echo.Echo/Echo, the standard health service
// (grpc.health.v1.Health/Check) and the reflection service (v1 and
// v1alpha), so that a client needs no .proto file. Echo returns the request's payload
// repeated `repeat` times (at least once); a call whose metadata has
// x-echo-status: N (N > 0) gets gRPC status N instead, with the message
// "asked for status N". Its switches change per-call costs by known
// amounts (targets/README.md):
//
//	-extra-allocs N   N more 64-byte heap allocations per call, in main.extraAlloc
//	-reflection=false   no reflection service (clients need -proto-file)
//	-reflection=v1alpha only the old reflection service (as older servers have)
//
// The messages are described in code (echoDescriptor) and handled as
// dynamic messages: no generated code, no protoc.
package main

//lint:file-ignore SA1019 v1alpha is deprecated; -reflection=v1alpha stands for the servers that still have only it

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	rpbalpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

var (
	addr        = flag.String("addr", "127.0.0.1:0", "listen address")
	extraAllocs = flag.Int("extra-allocs", 0, "64-byte heap allocations added to each call")
	workers     = flag.Uint("stream-workers", 0, "serve calls on this many pooled goroutines (grpc.NumStreamWorkers), 0 a goroutine per call")
	withReflect = flag.String("reflection", "true", "serve the reflection service: true (v1 and v1alpha), v1alpha (only the old one) or false")
)

// echoDescriptor is perfspy/echo.proto:
//
//	syntax = "proto3";
//	package perfspy.echo;
//	message EchoRequest { bytes payload = 1; int32 repeat = 2; }
//	message EchoReply { bytes payload = 1; }
//	service Echo { rpc Echo(EchoRequest) returns (EchoReply); }
func echoDescriptor() *descriptorpb.FileDescriptorProto {
	field := func(name string, n int32, t descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{Name: proto.String(name), JsonName: proto.String(name), Number: proto.Int32(n),
			Type: t.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()}
	}
	return &descriptorpb.FileDescriptorProto{
		Name: proto.String("perfspy/echo.proto"), Package: proto.String("perfspy.echo"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("EchoRequest"), Field: []*descriptorpb.FieldDescriptorProto{
				field("payload", 1, descriptorpb.FieldDescriptorProto_TYPE_BYTES), field("repeat", 2, descriptorpb.FieldDescriptorProto_TYPE_INT32)}},
			{Name: proto.String("EchoReply"), Field: []*descriptorpb.FieldDescriptorProto{
				field("payload", 1, descriptorpb.FieldDescriptorProto_TYPE_BYTES)}},
		},
		Service: []*descriptorpb.ServiceDescriptorProto{{Name: proto.String("Echo"), Method: []*descriptorpb.MethodDescriptorProto{
			{Name: proto.String("Echo"), InputType: proto.String(".perfspy.echo.EchoRequest"), OutputType: proto.String(".perfspy.echo.EchoReply")}}}},
	}
}

// extraAlloc is the -extra-allocs switch's one allocation: returned, so
// it is on the heap.
//
//go:noinline
func extraAlloc() *[64]byte { return new([64]byte) }

// echo is the method: the payload repeated.
type echo struct {
	in, out                  protoreflect.MessageDescriptor
	payload, repeat, outBody protoreflect.FieldDescriptor
}

func (e *echo) handle(ctx context.Context, dec func(any) error) (any, error) {
	in := dynamicpb.NewMessage(e.in)
	if err := dec(in); err != nil {
		return nil, err
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("x-echo-status"); len(v) > 0 {
			if n, _ := strconv.Atoi(v[0]); n > 0 {
				return nil, status.Errorf(codes.Code(n), "asked for status %d", n)
			}
		}
	}
	for range *extraAllocs {
		_ = extraAlloc()
	}
	p := in.Get(e.payload).Bytes()
	n := max(int(in.Get(e.repeat).Int()), 1)
	body := make([]byte, 0, n*len(p))
	for range n {
		body = append(body, p...)
	}
	out := dynamicpb.NewMessage(e.out)
	out.Set(e.outBody, protoreflect.ValueOfBytes(body))
	return out, nil
}

func main() {
	flag.Parse()
	fd, err := protodesc.NewFile(echoDescriptor(), protoregistry.GlobalFiles)
	if err != nil {
		log.Fatal(err)
	}
	if err := protoregistry.GlobalFiles.RegisterFile(fd); err != nil {
		log.Fatal(err)
	}
	msgs := fd.Messages()
	e := &echo{in: msgs.ByName("EchoRequest"), out: msgs.ByName("EchoReply")}
	e.payload, e.repeat = e.in.Fields().ByName("payload"), e.in.Fields().ByName("repeat")
	e.outBody = e.out.Fields().ByName("payload")
	s := grpc.NewServer(grpc.NumStreamWorkers(uint32(*workers)))
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "perfspy.echo.Echo",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Echo", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			return e.handle(ctx, dec)
		}}},
		Metadata: "perfspy/echo.proto",
	}, struct{}{})
	// The standard health service: its Check, the lightest method a gRPC
	// server has, is what the gRPC drivers' own cost is set against
	// (probe cost -what driver).
	healthpb.RegisterHealthServer(s, health.NewServer())
	switch *withReflect {
	case "true":
		reflection.Register(s)
	case "v1alpha":
		rpbalpha.RegisterServerReflectionServer(s, reflection.NewServer(reflection.ServerOptions{Services: s}))
	case "false":
	default:
		log.Fatalf("-reflection %q: want true, v1alpha or false", *withReflect)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintln(os.Stderr, "grpcecho: listening on", ln.Addr())
	log.Fatal(s.Serve(ln))
}
