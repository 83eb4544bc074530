package explain

import "github.com/eaddr/eaddr/decode"

// remember records what is known of ev's binary, as if it had been found:
// for recorded events, whose inodes are the recording machine's.
func (d *Detector) remember(ev *decode.Event, info BinaryInfo) {
	d.cache[exeKey{ev.ExeDev, ev.ExeIno}] = &binEntry{Found: Found{info: info, ok: true, source: "remembered"}, at: d.now()}
}
