package load

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
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
	raw, err := reflectV1(ctx, conn, svc)
	if status.Code(err) == codes.Unimplemented {
		raw, err = reflectV1Alpha(ctx, conn, svc)
	}
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

// reflectV1 asks grpc.reflection.v1 for the files containing symbol.
func reflectV1(ctx context.Context, conn *grpc.ClientConn, symbol string) ([][]byte, error) {
	st, err := rpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return nil, err
	}
	defer st.CloseSend()
	if err := st.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: symbol}}); err != nil {
		return nil, err
	}
	resp, err := st.Recv()
	if err != nil {
		return nil, err
	}
	if e := resp.GetErrorResponse(); e != nil {
		return nil, status.Error(codes.Code(e.GetErrorCode()), e.GetErrorMessage())
	}
	return resp.GetFileDescriptorResponse().GetFileDescriptorProto(), nil
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
	st, err := rpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err == nil {
		defer st.CloseSend()
		if err = st.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}); err == nil {
			_, err = st.Recv()
		}
	}
	if status.Code(err) == codes.Unimplemented {
		return listV1Alpha(ctx, conn) == nil
	}
	return err == nil
}
