//lint:file-ignore SA1019 v1alpha is deprecated, and still the only reflection some servers have

package load

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	rpbalpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
)

// reflectV1Alpha is reflectV1 for servers that have only v1alpha.
func reflectV1Alpha(ctx context.Context, conn *grpc.ClientConn, symbol string) ([][]byte, error) {
	st, err := rpbalpha.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return nil, err
	}
	defer st.CloseSend()
	if err := st.Send(&rpbalpha.ServerReflectionRequest{MessageRequest: &rpbalpha.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: symbol}}); err != nil {
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

// listV1Alpha asks grpc.reflection.v1alpha for the services.
func listV1Alpha(ctx context.Context, conn *grpc.ClientConn) error {
	st, err := rpbalpha.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return err
	}
	defer st.CloseSend()
	if err := st.Send(&rpbalpha.ServerReflectionRequest{MessageRequest: &rpbalpha.ServerReflectionRequest_ListServices{}}); err != nil {
		return err
	}
	_, err = st.Recv()
	return err
}
