package load

// Spec is what the load driver sends and how, as a run's command line
// gives it (probe's flags are narrowed to it at the edge): the protocol
// and driver, the request, the connections, and the bulk drivers'
// transfers. A run makes its driver from a Spec and the target's address.
type Spec struct {
	// Proto is the driver: auto, http, https, h2c, h2, grpc, framed,
	// quic or udp; auto is resolved by what the started target answers.
	Proto string
	// HTTPDriver is the HTTP/1.1 driver: lean (the default) or nethttp
	// (net/http's client, the reference). GRPCDriver is the gRPC driver:
	// lean (the default: HTTP/2 frames written and read directly) or
	// grpcgo (grpc-go's client, the reference).
	HTTPDriver, GRPCDriver string
	Path                   string // request path, default /json for the default target, / otherwise
	Method                 string // HTTP method, or with grpc package.Service/Method
	Body                   []byte
	Headers                map[string]string // HTTP request headers, gRPC metadata
	Conns                  int
	// CACert verifies a TLS server's certificate (https, h2); Insecure
	// does not verify it, and the report says so.
	CACert   string
	Insecure bool
	// Data is the gRPC request message as JSON (-data), and the HTTP
	// requests' body when Body is nil; ProtoFiles and
	// ImportPaths describe a gRPC server without reflection.
	Data        []byte
	ProtoFiles  []string
	ImportPaths []string
	// Mix is a request file's requests (-requests FILE): the lean driver
	// sends them in their fixed order.
	Mix []Request
	// BodySize is the framed driver's request body, default 1024.
	BodySize int
	// Size is the bytes of one transfer of the bulk drivers (quic, udp),
	// default 1 MiB; Streams the concurrent streams per connection (quic,
	// h2c, h2), default 1; Pkt the udp driver's datagram size, default
	// 1252.
	Size    int64
	Streams int
	Pkt     int
	// Arrivals, when open (-rate), sends on a clock: the HTTP, h2 and
	// gRPC drivers.
	Arrivals Arrivals
}
