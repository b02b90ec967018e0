package ops

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestStatusPageInHeadlessChromium loads the status page of a running
// instance in a real browser and checks what it rendered: the layout's shard
// count, the tracked total, the devices down, one bar per shard, the owner table and a live
// connection (both /status and /metrics fetched without error). It saves a
// screenshot under the test's temp dir (and in $FLATLINE_TEST_SCREENSHOTS
// when set, to keep it).
func TestStatusPageInHeadlessChromium(t *testing.T) {
	bin := chromiumBinary(t)
	const shards, live, silent = 8, 200, 20
	in := startInstance(t, shards)

	// Long-lived devices stay tracked; the silent ones time out after 1s
	// and leave, so the page has timeouts and lateness to show too.
	in.send(t, append(heartbeats("live-", live, 0), heartbeats("silent-", silent, 1000)...))
	e2etest.EventuallyNil(t, 20*time.Second, "the fleet tracked and the silent devices timed out", func() error {
		st := in.status(t)
		owned := 0
		for _, s := range st.Shards {
			if s.Owner != "" {
				owned++
			}
		}
		if st.Tracked != live || st.Down != silent || owned != shards {
			return fmt.Errorf("tracked %d (want %d), down %d (want %d), %d of %d shards owned", st.Tracked, live, st.Down, silent, owned, shards)
		}
		return nil
	})

	// --virtual-time-budget lets the page run its timers (several polls)
	// before the DOM is dumped; network loads are waited for.
	dom := runChromium(t, bin, "--virtual-time-budget=5000", "--dump-dom", in.base+"/")
	if got := elementByID(t, dom, "shard-count"); got.attr("data-value") != strconv.Itoa(shards) || got.text != strconv.Itoa(shards) {
		t.Errorf("shard count rendered as %q (data-value %q), want %d", got.text, got.attr("data-value"), shards)
	}
	tracked := elementByID(t, dom, "tracked")
	if n, _ := strconv.Atoi(tracked.attr("data-value")); n != live || tracked.text != strconv.Itoa(live) {
		t.Errorf("tracked rendered as %q (data-value %q), want %d", tracked.text, tracked.attr("data-value"), live)
	}
	if mode, policy := elementByID(t, dom, "r-mode"), elementByID(t, dom, "r-policy"); mode.text != "standalone" || policy.text != "noeviction" {
		t.Errorf("redis rendered as mode %q, maxmemory-policy %q; want standalone, noeviction", mode.text, policy.text)
	}
	down := elementByID(t, dom, "down")
	if n, _ := strconv.Atoi(down.attr("data-value")); n != silent || down.text != strconv.Itoa(silent) {
		t.Errorf("devices down rendered as %q (data-value %q), want %d", down.text, down.attr("data-value"), silent)
	}
	if conn := elementByID(t, dom, "conn"); conn.text != "live" {
		t.Errorf("connection pill says %q, want live (the page failed to fetch its data)", conn.text)
	}
	if banner := elementByID(t, dom, "banner"); banner.text != "" {
		t.Errorf("error banner shown: %q", banner.text)
	}
	if banner := elementByID(t, dom, "storm-banner"); banner.text != "" {
		t.Errorf("storm banner shown with no stall: %q", banner.text)
	}
	bars := regexp.MustCompile(`(?s)<svg[^>]*id="chart-shards".*?</svg>`).FindString(dom)
	if n := strings.Count(bars, "<rect"); n != shards {
		t.Errorf("shard bar chart has %d bars, want %d", n, shards)
	}
	owners := regexp.MustCompile(`(?s)<table id="owners">.*?</table>`).FindString(dom)
	if !strings.Contains(owners, in.ID()) || !strings.Contains(owners, ">"+strconv.Itoa(shards)+" ") {
		t.Errorf("owner table does not show %s owning %d shards:\n%s", in.ID(), shards, owners)
	}
	if strings.Contains(dom, "collecting…") && !strings.Contains(dom, "<path") {
		t.Errorf("no chart drew a line")
	}

	// A stalled partition, as ingest records it, shows in the storm banner.
	// (Partition 3 of 4 carries nothing here: its probes end no stall.)
	if _, err := in.Store.MarkStalled(t.Context(), 3, time.Now().UnixMilli(), time.Now().UnixMilli(), 1<<40, "page-test"); err != nil {
		t.Fatal(err)
	}
	dom = runChromium(t, bin, "--virtual-time-budget=3000", "--dump-dom", in.base+"/")
	if banner := elementByID(t, dom, "storm-banner"); !strings.Contains(banner.text, "Firing held for") || !strings.Contains(banner.text, "partitions 3 stalled") {
		t.Errorf("storm banner %q, want firing held and partition 3 stalled", banner.text)
	}

	dir := t.TempDir()
	shot := filepath.Join(dir, "status.png")
	runChromium(t, bin, "--window-size=1280,900", "--hide-scrollbars", "--virtual-time-budget=5000",
		"--screenshot="+shot, in.base+"/")
	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 10_000 {
		t.Fatalf("screenshot %s is not a plausible PNG (%d bytes)", shot, len(png))
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))
	if keep := os.Getenv("FLATLINE_TEST_SCREENSHOTS"); keep != "" {
		if err := os.MkdirAll(keep, 0o755); err == nil {
			_ = os.WriteFile(filepath.Join(keep, "status.png"), png, 0o644)
		}
	}
}

// chromiumBinary finds headless Chromium: in CI its absence fails the test
// (.ci/run installs the Debian package), elsewhere it skips.
func chromiumBinary(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "/usr/bin/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if testenv.InCI() {
		t.Fatal("chromium not found: CI must run the browser test (apt-get install chromium)")
	}
	t.Skip("chromium not installed (apt-get install chromium); skipping the browser test")
	return ""
}

// runChromium runs one headless Chromium command with a fresh profile and
// returns its stdout.
func runChromium(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	profile := t.TempDir()
	base := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-crash-reporter", "--disable-breakpad", "--disable-extensions", "--mute-audio",
		"--user-data-dir=" + profile,
	}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+profile)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	t.Logf("chromium %s: %s", args[len(args)-2], time.Since(start).Round(time.Millisecond))
	return stdout.String()
}

type element struct {
	attrs string
	text  string
}

func (e element) attr(name string) string {
	m := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `="([^"]*)"`).FindStringSubmatch(e.attrs)
	if m == nil {
		return ""
	}
	return m[1]
}

// elementByID finds the element with id in the serialized DOM and its text
// (up to its first child tag; the checked elements hold text only).
func elementByID(t *testing.T, dom, id string) element {
	t.Helper()
	m := regexp.MustCompile(`<\w+([^>]*\bid="` + regexp.QuoteMeta(id) + `"[^>]*)>([^<]*)`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("rendered page has no element #%s", id)
	}
	return element{attrs: m[1], text: strings.TrimSpace(m[2])}
}
