package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"net"
)

// reflectFiles asks the server's reflection service (grpc.reflection.v1,
// then v1alpha) for the file that defines service svc and the files it
// imports, and returns them as a registry.
func reflectFiles(ctx context.Context, addr, svc string) (Resolver, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var raw [][]byte
	err = eachReflection(func(service string) error {
		resp, err := reflectionCall(ctx, conn, service, &rpb.ServerReflectionRequest{
			MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: svc}})
		raw = resp.GetFileDescriptorResponse().GetFileDescriptorProto()
		return err
	})
	if status.Code(err) == codes.NotFound {
		return nil, fmt.Errorf("load: %s has no service %s (its reflection service: %v)", addr, svc, status.Convert(err).Message())
	}
	if err != nil {
		return nil, fmt.Errorf("load: %s does not answer gRPC reflection for %s (a gRPC server without reflection needs -proto-file): %w", addr, svc, err)
	}
	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	for _, b := range raw {
		fd := &descriptorpb.FileDescriptorProto{}
		if err := proto.Unmarshal(b, fd); err != nil {
			return nil, fmt.Errorf("load: reflection sent a file descriptor that does not parse: %w", err)
		}
		if !seen[fd.GetName()] {
			seen[fd.GetName()] = true
			set.File = append(set.File, fd)
		}
	}
	files, err := protodesc.NewFiles(set)
	if err != nil {
		return nil, fmt.Errorf("load: the descriptors reflection sent: %w", err)
	}
	return files, nil
}

// The reflection services, newest first. v1alpha's messages are v1's on
// the wire, under another service name, so v1's types serve for both.
var reflectionServices = []string{"grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"}

// eachReflection calls f with each reflection service until the server
// does not answer Unimplemented, and returns f's last error.
func eachReflection(f func(service string) error) error {
	var err error
	for _, s := range reflectionServices {
		if err = f(s); status.Code(err) != codes.Unimplemented {
			return err
		}
	}
	return err
}

// reflectionCall sends one request on service's ServerReflectionInfo
// stream and returns its answer; an error answer is returned as its status.
func reflectionCall(ctx context.Context, conn *grpc.ClientConn, service string, req *rpb.ServerReflectionRequest) (*rpb.ServerReflectionResponse, error) {
	desc := &grpc.StreamDesc{StreamName: "ServerReflectionInfo", ClientStreams: true, ServerStreams: true}
	st, err := conn.NewStream(ctx, desc, "/"+service+"/ServerReflectionInfo")
	if err != nil {
		return nil, err
	}
	defer st.CloseSend()
	// io.EOF: the server has ended the stream already (Unimplemented, on
	// a server without this service); RecvMsg returns its status.
	if err := st.SendMsg(req); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	resp := &rpb.ServerReflectionResponse{}
	if err := st.RecvMsg(resp); err != nil {
		return nil, err
	}
	if e := resp.GetErrorResponse(); e != nil {
		return nil, status.Error(codes.Code(e.GetErrorCode()), e.GetErrorMessage())
	}
	return resp, nil
}

// AnswersReflection tells whether addr answers the gRPC reflection
// service (v1 or v1alpha) within a second: -proto auto's test.
func AnswersReflection(ctx context.Context, addr string) bool {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return false
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return eachReflection(func(service string) error {
		_, err := reflectionCall(ctx, conn, service, &rpb.ServerReflectionRequest{
			MessageRequest: &rpb.ServerReflectionRequest_ListServices{ListServices: "*"}})
		return err
	}) == nil
}

// AnswersHTTP1 tells whether addr answers an HTTP/1.1 request for path
// (its status line) within a second: the request the run sends anyway,
// so that an HTTP/1 server sees nothing it would log as an error.
func AnswersHTTP1(ctx context.Context, addr, path string) bool {
	c, err := dialFor(ctx, "tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, addr); err != nil {
		return false
	}
	head := make([]byte, 5)
	_, err = io.ReadFull(c, head)
	return err == nil && string(head) == "HTTP/"
}

// OnlyMethod asks addr's reflection service for its services and returns
// "package.Service/Method" when it serves exactly one method (reflection
// and the standard health service aside: most servers register them
// beside their own): the RPC a run with no -method sends.
func OnlyMethod(ctx context.Context, addr string) (string, bool) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", false
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var services []string
	err = eachReflection(func(service string) error {
		resp, err := reflectionCall(ctx, conn, service, &rpb.ServerReflectionRequest{
			MessageRequest: &rpb.ServerReflectionRequest_ListServices{ListServices: "*"}})
		services = services[:0]
		for _, s := range resp.GetListServicesResponse().GetService() {
			if n := s.GetName(); !strings.HasPrefix(n, "grpc.reflection.") && n != "grpc.health.v1.Health" {
				services = append(services, n)
			}
		}
		return err
	})
	if err != nil || len(services) != 1 {
		return "", false
	}
	files, err := reflectFiles(ctx, addr, services[0])
	if err != nil {
		return "", false
	}
	d, err := files.FindDescriptorByName(protoreflect.FullName(services[0]))
	if err != nil {
		return "", false
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok || sd.Methods().Len() != 1 {
		return "", false
	}
	return services[0] + "/" + string(sd.Methods().Get(0).Name()), true
}

// dialFor dials addr over network for a question that must be answered
// within d: the dial, every write and every read end by then.
func dialFor(ctx context.Context, network, addr string, d time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var dl net.Dialer
	c, err := dl.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(d))
	return c, nil
}
