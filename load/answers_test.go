package load

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestAnswers: -proto auto's tests tell the protocols apart by what a
// server answers: a framed server answers a frame and no HTTP, an HTTP
// server the reverse; a UDP echo answers a bulk transfer, a silent UDP
// socket (as a QUIC server is to it) does not.
func TestAnswers(t *testing.T) {
	ctx := context.Background()
	framed, _ := echoServer(t, false)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer web.Close()
	webAddr := web.Listener.Addr().String()
	if !AnswersFramed(ctx, framed) || AnswersHTTP1(ctx, framed, "/") {
		t.Errorf("a framed server: framed %v, HTTP/1.1 %v", AnswersFramed(ctx, framed), AnswersHTTP1(ctx, framed, "/"))
	}
	if AnswersFramed(ctx, webAddr) || !AnswersHTTP1(ctx, webAddr, "/") {
		t.Errorf("an HTTP server: framed %v, HTTP/1.1 %v", AnswersFramed(ctx, webAddr), AnswersHTTP1(ctx, webAddr, "/"))
	}
	echo := udpSocket(t, true)
	silent := udpSocket(t, false)
	if !AnswersBulkUDP(ctx, echo) {
		t.Error("a UDP echo does not answer a bulk transfer")
	}
	if AnswersBulkUDP(ctx, silent) {
		t.Error("a silent UDP socket answers a bulk transfer")
	}
}

// udpSocket listens on loopback UDP and, with echo, sends every datagram
// back.
func udpSocket(t *testing.T, echo bool) string {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		b := make([]byte, 2048)
		for {
			n, from, err := c.ReadFrom(b)
			if err != nil {
				return
			}
			if echo {
				c.WriteTo(b[:n], from)
			}
		}
	}()
	return c.LocalAddr().String()
}
