package explain

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// glibc's own translations of the errno texts are recognised, alone or
// inside a line, with the language they are in; a client's words around
// them are not claimed.
func TestTranslations(t *testing.T) {
	c, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in    string
		errno int
		lang  string
	}{
		{"无法指定被请求的地址", decode.EADDRNOTAVAIL, "zh_CN"},
		{"Die angeforderte Adresse kann nicht zugewiesen werden", decode.EADDRNOTAVAIL, "de"},
		{"Ne peut attribuer l'adresse demandée", decode.EADDRNOTAVAIL, "fr"},
		{"No se puede asignar la dirección solicitada", decode.EADDRNOTAVAIL, "es"},
		{"要求アドレスに割り当てられません", decode.EADDRNOTAVAIL, "ja"},
		{"Невозможно назначить запрошенный адрес", decode.EADDRNOTAVAIL, "ru"},
		{"Die Adresse wird bereits verwendet", decode.EADDRINUSE, "de"},
		{"地址已在使用", decode.EADDRINUSE, "zh_CN"},
		{"Endereço já em uso", decode.EADDRINUSE, "pt, pt_BR"},
		{"wget: can't connect to remote host (1.1.1.1): 无法指定被请求的地址", decode.EADDRNOTAVAIL, "zh_CN"},
		{"connect: die angeforderte Adresse kann nicht zugewiesen werden", decode.EADDRNOTAVAIL, "de"},
	} {
		ids := c.Identify(tc.in)
		if len(ids) == 0 {
			t.Errorf("%q not recognised", tc.in)
			continue
		}
		id := ids[0]
		if id.Errno != tc.errno || id.Lang != tc.lang || id.Libc != libcGlibc || id.Client != nil {
			t.Errorf("%q: errno %d lang %q libc %q client %v; want %d %q glibc and no client", tc.in, id.Errno, id.Lang, id.Libc, id.Client, tc.errno, tc.lang)
		}
	}
	if !LooksTranslated("无法指定") || !LooksTranslated("adresse demandée") || LooksTranslated("Address not available") {
		t.Error("LooksTranslated")
	}
}

// The table's keys are glibc's own words for the two errnos.
func TestTranslationsAreGlibcs(t *testing.T) {
	seen := map[int]int{}
	for _, tr := range glibcTranslations {
		seen[tr.Errno]++
		if en, _ := strerror(libcGlibc, tr.Errno); tr.Text == en || tr.Text == "" || tr.Langs == "" {
			t.Errorf("%+v", tr)
		}
	}
	if seen[decode.EADDRINUSE] < 20 || seen[decode.EADDRNOTAVAIL] < 20 || len(seen) != 2 {
		t.Errorf("translations per errno: %v", seen)
	}
}

// strerror_l10n.go is what the generator writes from this host's glibc
// catalogs (Debian's libc-l10n); with another release of them the texts may
// differ, and the test says so and skips.
func TestTranslationsGenerated(t *testing.T) {
	if _, err := os.Stat("/usr/share/locale/de/LC_MESSAGES/libc.mo"); err != nil {
		testenv.Missing(t, "/usr/share/locale/*/LC_MESSAGES/libc.mo", "libc-l10n")
	}
	if _, err := exec.LookPath("go"); err != nil {
		testenv.Skip(t, "go is not on PATH: it regenerates the translations")
	}
	dir := t.TempDir()
	if out, err := exec.Command("go", "run", "./internal/strerrorl10n", "-out", dir).CombinedOutput(); err != nil {
		t.Fatalf("go run ./internal/strerrorl10n: %v\n%s", err, out)
	}
	compareGenerated(t, "strerror_l10n.go", filepath.Join(dir, "strerror_l10n.go"))
}
