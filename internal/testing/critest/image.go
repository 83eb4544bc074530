package critest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Image is the local image reference used for every container and as the
// sandbox ("pause") image. It is built by the helper itself (see buildImage):
// a single uncompressed layer holding busybox-static (BusyboxPath) as
// /bin/busybox plus one /bin/<applet> symlink per applet it provides, a
// minimal /etc/passwd and /etc/group, and empty /dev, /proc, /sys, /tmp. Its
// config runs `/bin/sleep 1000000` (the pod's sandbox process) and sets PATH.
// It is never pulled: Start imports it into the k8s.io namespace with ctr.
//
// Beware: Debian 12's busybox-static segfaults on `wget -T N`; bound a
// command with `timeout N wget ...` or with Exec's timeout instead.
const Image = "localhost/eaddr-busybox:test"

// BusyboxPath is the statically linked busybox copied into Image
// (Debian package busybox-static).
const BusyboxPath = "/usr/bin/busybox"

// imageEpoch is the fixed timestamp of every file and of the config, so the
// image (and thus its digests) is byte-for-byte reproducible.
var imageEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Media types of the OCI image spec (kept local to avoid a dependency).
const (
	mediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	mediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Variant      string `json:"variant,omitempty"`
}

// ociArch returns the OCI architecture and variant of the running binary.
func ociArch() (arch, variant string) {
	switch runtime.GOARCH {
	case "arm":
		return "arm", "v7"
	case "arm64":
		return "arm64", "v8"
	}
	return runtime.GOARCH, ""
}

// busyboxApplets returns the applet names of the busybox binary at path.
func busyboxApplets(path string) ([]string, error) {
	out, err := exec.Command(path, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", path, err)
	}
	var applets []string
	for _, a := range strings.Fields(string(out)) {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		applets = append(applets, a)
	}
	// Make sure the applets the tests rely on are there.
	for _, need := range []string{"sh", "sleep", "cat", "wget", "nc"} {
		if !contains(applets, need) {
			return nil, fmt.Errorf("%s has no %q applet", path, need)
		}
	}
	sort.Strings(applets)
	return applets, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// buildLayer returns an uncompressed tar layer with busybox and its applets.
func buildLayer(busybox []byte, applets []string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := func(h *tar.Header) error {
		h.ModTime = imageEpoch
		h.Uname, h.Gname = "root", "root"
		h.Format = tar.FormatPAX
		return tw.WriteHeader(h)
	}
	dir := func(name string, mode int64) error {
		return hdr(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := hdr(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []struct {
		name string
		mode int64
	}{
		{"bin", 0o755}, {"dev", 0o755}, {"etc", 0o755}, {"proc", 0o555}, {"root", 0o700},
		{"sys", 0o555}, {"tmp", 0o1777}, {"usr", 0o755}, {"usr/bin", 0o755}, {"var", 0o755},
	} {
		if err := dir(d.name, d.mode); err != nil {
			return nil, err
		}
	}
	if err := file("bin/busybox", 0o755, busybox); err != nil {
		return nil, err
	}
	for _, a := range applets {
		if err := hdr(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777}); err != nil {
			return nil, err
		}
	}
	if err := file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")); err != nil {
		return nil, err
	}
	if err := file("etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n")); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// buildImage writes Image as an OCI image layout tar archive to path
// (oci-layout, index.json, blobs/sha256/{layer,config,manifest}) and returns
// the manifest digest. The index entry carries the io.containerd.image.name
// annotation so that `ctr images import` names it Image.
func buildImage(path string) (string, error) {
	busybox, err := os.ReadFile(BusyboxPath)
	if err != nil {
		return "", err
	}
	applets, err := busyboxApplets(BusyboxPath)
	if err != nil {
		return "", err
	}
	layer, err := buildLayer(busybox, applets)
	if err != nil {
		return "", err
	}
	layerDigest := digestOf(layer)
	arch, variant := ociArch()
	config, err := imageConfig(layerDigest, arch, variant)
	if err != nil {
		return "", err
	}
	configDigest := digestOf(config)
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaTypeManifest,
		"config":        descriptor{MediaType: mediaTypeConfig, Digest: configDigest, Size: int64(len(config))},
		"layers":        []descriptor{{MediaType: mediaTypeLayer, Digest: layerDigest, Size: int64(len(layer))}},
	})
	if err != nil {
		return "", err
	}
	manifestDigest := digestOf(manifest)
	index, err := imageIndex(manifestDigest, len(manifest), arch, variant)
	if err != nil {
		return "", err
	}
	blob := func(d string) string { return "blobs/sha256/" + strings.TrimPrefix(d, "sha256:") }
	return manifestDigest, writeLayout(path, []layoutFile{
		{"oci-layout", 0o644, []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", 0o644, index},
		{"blobs/", 0o755, nil},
		{"blobs/sha256/", 0o755, nil},
		{blob(layerDigest), 0o644, layer},
		{blob(configDigest), 0o644, config},
		{blob(manifestDigest), 0o644, manifest},
	})
}

// imageConfig is the image's config blob: busybox's sleep as the entrypoint,
// the one layer, a fixed creation time (the same bytes at every build).
func imageConfig(layerDigest, arch, variant string) ([]byte, error) {
	cfg := map[string]any{
		"created":      imageEpoch.Format(time.RFC3339),
		"architecture": arch,
		"os":           "linux",
		"config": map[string]any{
			"Env":        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			"Entrypoint": []string{"/bin/sleep"},
			"Cmd":        []string{"1000000"},
			"WorkingDir": "/",
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
		"history": []map[string]any{{
			"created":    imageEpoch.Format(time.RFC3339),
			"created_by": "eaddr internal/testing/critest: busybox-static " + BusyboxPath,
		}},
	}
	if variant != "" {
		cfg["variant"] = variant
	}
	return json.Marshal(cfg)
}

// imageIndex is index.json: the one manifest, named Image for containerd.
func imageIndex(manifestDigest string, manifestSize int, arch, variant string) ([]byte, error) {
	return json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaTypeIndex,
		"manifests": []descriptor{{
			MediaType: mediaTypeManifest,
			Digest:    manifestDigest,
			Size:      int64(manifestSize),
			Annotations: map[string]string{
				"io.containerd.image.name":          Image,
				"org.opencontainers.image.ref.name": "test",
			},
			Platform: &platform{Architecture: arch, OS: "linux", Variant: variant},
		}},
	})
}

// layoutFile is one entry of the layout's tar archive; no data is a directory.
type layoutFile struct {
	name string
	mode int64
	data []byte
}

// writeLayout writes files as a tar archive to path.
func writeLayout(path string, files []layoutFile) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: imageEpoch, Format: tar.FormatPAX, Typeflag: tar.TypeDir}
		if f.data != nil {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
