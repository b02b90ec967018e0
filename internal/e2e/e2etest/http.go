package e2etest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// HTTPStatus GETs url and returns the status code, 0 when the server does
// not answer within 3 s: a probe, as a load balancer's.
func HTTPStatus(url string) int {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// getClient is HTTPGet's: a GET may take 10 s.
var getClient = &http.Client{Timeout: 10 * time.Second}

// HTTPGet returns the body of a 200 answer to a GET of url.
func HTTPGet(url string) ([]byte, error) {
	return httpGet(context.Background(), getClient, url)
}

// httpGet is HTTPGet through client, within ctx.
func httpGet(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return b, nil
}
