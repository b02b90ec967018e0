package testenv_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestRemovedNodeDropsItsConnections: a node removed from the cluster
// closes the connections it had accepted, as a Kafka broker that stops
// does; kfake alone keeps serving them from the removed broker.
func TestRemovedNodeDropsItsConnections(t *testing.T) {
	t.Parallel()
	k := testenv.KafkaWith(t, []kfake.Opt{kfake.NumBrokers(2)}, partitions, "signals")
	addr := k.Brokers()[1] // node 1: kfake numbers its first nodes in order
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := apiVersions(conn); err != nil {
		t.Fatalf("ApiVersions before the node's removal: %v", err)
	}
	if err := k.Cluster().RemoveNode(1); err != nil {
		t.Fatal(err)
	}
	err = apiVersions(conn)
	if err == nil {
		t.Fatal("the removed node still answers on a connection it accepted before")
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the removed node's connection stays open without an answer: %v", err)
	}
}

// apiVersions sends an ApiVersions v0 request on conn and reads the answer.
func apiVersions(conn net.Conn) error {
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	// size, api key 18, version 0, correlation id 1, null client id; the
	// v0 body is empty.
	req := []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff}
	if _, err := conn.Write(req); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 1<<20 {
		return fmt.Errorf("answer of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(conn, body); err != nil {
		return err
	}
	if id := binary.BigEndian.Uint32(body); id != 1 {
		return fmt.Errorf("answer to correlation id %d, want 1", id)
	}
	return nil
}
