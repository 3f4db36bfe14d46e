package admin

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestHealth(t *testing.T) {
	t.Parallel()
	fx := setup(t)
	fx.run(fx.srv.Run)

	t.Run("alive and not ready before the forwarder runs", func(t *testing.T) {
		if code, body := fx.get("/livez"); code != http.StatusOK {
			t.Errorf("/livez = %d %q, want 200", code, body)
		}
		if code, body := fx.get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "starting") {
			t.Errorf("/readyz = %d %q, want 503 saying it is starting", code, body)
		}
	})
	t.Run("ready only once every level is assigned", func(t *testing.T) {
		fx.run(fx.fwd.Run)
		<-fx.fwd.Ready()
		fx.waitStatus("/readyz", http.StatusOK, 30*time.Second)
		for _, l := range fx.fwd.Levels() {
			if !l.Assigned {
				t.Errorf("/readyz answered 200 while level %s has no assignment", l.Level)
			}
		}
	})
	t.Run("not ready and still alive when the broker goes away", func(t *testing.T) {
		if fx.cluster.Real() {
			t.Skip("closes the broker: kfake only")
		}
		fx.gone.Store(true)
		fx.cluster.Fake.Close()
		body := fx.waitStatus("/readyz", http.StatusServiceUnavailable, 10*time.Second)
		t.Logf("/readyz: %s", body)
		if code, body := fx.get("/livez"); code != http.StatusOK {
			t.Errorf("/livez = %d %q with the broker gone, want 200: a broker outage must not restart kdelay", code, body)
		}
		if n, _ := value(fx.scrape(), "kdelay_ready", nil); n != 0 {
			t.Errorf("kdelay_ready = %v with the broker gone, want 0", n)
		}
	})
}
