package kfetch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/apiversions"
	"github.com/segmentio/kafka-go/protocol/saslauthenticate"
	"github.com/segmentio/kafka-go/protocol/saslhandshake"
	"github.com/segmentio/kafka-go/sasl"
)

// DialLeader opens a Conn to the leader of topic/partition, asking the
// brokers in turn where it is (a fresh metadata request: after
// NotLeaderForPartition, dialing again finds the new leader at once).
// TLS, SASL, client ID and dial timeout come from d, as kafka-go's own
// connections take them.
func DialLeader(ctx context.Context, d *kafka.Dialer, brokers []string, topic string, partition int, cfg Config) (*Conn, error) {
	if len(brokers) == 0 {
		return nil, errors.New("kfetch: no brokers to ask for the leader")
	}
	var leader kafka.Broker
	var err error
	for _, b := range brokers {
		if leader, err = d.LookupLeader(ctx, "tcp", b, topic, partition); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("look up the leader of %s/%d: %w", topic, partition, err)
	}
	return Dial(ctx, d, net.JoinHostPort(leader.Host, strconv.Itoa(leader.Port)), cfg)
}

// Leaders returns the address (host:port) of the leader of every partition
// of topic, asking the brokers in turn (one fresh metadata request, as
// DialLeader's). A partition without a leader just now is left out.
func Leaders(ctx context.Context, d *kafka.Dialer, brokers []string, topic string) (map[int]string, error) {
	if len(brokers) == 0 {
		return nil, errors.New("kfetch: no brokers to ask for the leaders")
	}
	var parts []kafka.Partition
	var err error
	for _, b := range brokers {
		if parts, err = d.LookupPartitions(ctx, "tcp", b, topic); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("look up the leaders of %s: %w", topic, err)
	}
	out := make(map[int]string, len(parts))
	for _, p := range parts {
		if p.Topic == topic && p.Leader.Host != "" {
			out[p.ID] = net.JoinHostPort(p.Leader.Host, strconv.Itoa(p.Leader.Port))
		}
	}
	return out, nil
}

// Dial opens a Conn to the broker at addr (host:port): TCP (d.DialFunc when
// set), TLS when d.TLS is set, API version negotiation, then SASL when
// d.SASLMechanism is set.
func Dial(ctx context.Context, d *kafka.Dialer, addr string, cfg Config) (*Conn, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	nc, err := dialTCP(ctx, d, addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	c, err := handshake(ctx, d, nc, addr, cfg)
	if err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return c, nil
}

func dialTCP(ctx context.Context, d *kafka.Dialer, addr string) (net.Conn, error) {
	dial := d.DialFunc
	if dial == nil {
		dial = (&net.Dialer{LocalAddr: d.LocalAddr, KeepAlive: d.KeepAlive, FallbackDelay: d.FallbackDelay}).DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil || d.TLS == nil {
		return nc, err
	}
	cfg := d.TLS
	if cfg.ServerName == "" {
		host, _, _ := net.SplitHostPort(addr)
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	return tc, nil
}

// handshake negotiates API versions and authenticates, within ctx.
func handshake(ctx context.Context, d *kafka.Dialer, nc net.Conn, addr string, cfg Config) (*Conn, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	pc := protocol.NewConn(nc, d.ClientID)
	m, err := pc.RoundTrip(new(apiversions.Request))
	if err != nil {
		return nil, fmt.Errorf("api versions: %w", ctxErr(ctx, err))
	}
	av := m.(*apiversions.Response)
	if av.ErrorCode != 0 {
		return nil, fmt.Errorf("api versions: %w", kafka.Error(av.ErrorCode))
	}
	versions := make(map[protocol.ApiKey]int16, len(av.ApiKeys))
	for _, k := range av.ApiKeys {
		key := protocol.ApiKey(k.ApiKey)
		versions[key] = key.SelectVersion(k.MinVersion, k.MaxVersion)
	}
	pc.SetVersions(versions)
	fv, ok := versions[protocol.Fetch]
	if !ok || fv < minFetchVersion {
		return nil, fmt.Errorf("the broker's Fetch goes up to v%d; read_committed needs v%d", fv, minFetchVersion)
	}
	if d.SASLMechanism != nil {
		host, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		sctx := sasl.WithMetadata(ctx, &sasl.Metadata{Host: host, Port: port})
		if err := authenticate(sctx, pc, d.SASLMechanism); err != nil {
			return nil, fmt.Errorf("SASL %s: %w", d.SASLMechanism.Name(), ctxErr(ctx, err))
		}
	}
	if !stop() {
		return nil, ctx.Err() // it may yet move the deadline
	}
	_ = nc.SetDeadline(time.Time{})
	return newConn(pc, d.ClientID, min(fv, maxFetchVersion), cfg), nil
}

// authenticate runs a SASL exchange (SaslHandshake v1, then
// SaslAuthenticate), as kafka-go's Transport does.
func authenticate(ctx context.Context, pc *protocol.Conn, mech sasl.Mechanism) error {
	m, err := pc.RoundTrip(&saslhandshake.Request{Mechanism: mech.Name()})
	if err != nil {
		return err
	}
	if code := m.(*saslhandshake.Response).ErrorCode; code != 0 {
		return kafka.Error(code)
	}
	sess, state, err := mech.Start(ctx)
	if err != nil {
		return err
	}
	for done := false; !done; {
		m, err := pc.RoundTrip(&saslauthenticate.Request{AuthBytes: state})
		if errors.Is(err, io.EOF) {
			// A broker may end a failed exchange by closing the connection.
			return kafka.SASLAuthenticationFailed
		}
		if err != nil {
			return err
		}
		res := m.(*saslauthenticate.Response)
		if res.ErrorCode != 0 {
			return fmt.Errorf("%w: %s", kafka.Error(res.ErrorCode), res.ErrorMessage)
		}
		if done, state, err = sess.Next(ctx, res.AuthBytes); err != nil {
			return err
		}
	}
	return nil
}

// ctxErr prefers the context's error to the I/O error it caused by moving
// the deadline.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return err
}
