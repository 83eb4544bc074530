package eaddrtest

import "encoding/json"

// JSONEvent mirrors the JSON contract of docs/events.md, field for field,
// so that a renamed or retyped field fails here.
type JSONEvent struct {
	Schema   int    `json:"schema"`
	Kind     string `json:"kind"`
	Time     string `json:"time"`
	Node     string `json:"node"`
	Syscall  string `json:"syscall"`
	Errno    string `json:"errno"`
	ErrnoNum int    `json:"errno_num"`
	Process  struct {
		PID  int    `json:"pid"`
		TID  int    `json:"tid"`
		PPID int    `json:"ppid"`
		UID  int    `json:"uid"`
		Comm string `json:"comm"`
		Exe  string `json:"exe"`
		// ExeUnresolved: why exe is missing (sent once, no longer kept).
		ExeUnresolved string `json:"exe_unresolved"`
	} `json:"process"`
	Socket struct {
		FD       int    `json:"fd"`
		Family   string `json:"family"`
		Type     string `json:"type"`
		Protocol string `json:"protocol"`
		Cookie   uint64 `json:"cookie"`
	} `json:"socket"`
	Local *JSONAddr `json:"local"`
	// LocalReleased: local is the released source port of a failed connect.
	LocalReleased bool      `json:"local_released"`
	Remote        *JSONAddr `json:"remote"`
	Explain       *struct {
		Meaning       string   `json:"meaning"`
		Expected      string   `json:"expected"`
		Runtime       string   `json:"runtime"`
		Libc          string   `json:"libc"`
		Client        string   `json:"client"`
		ClientMessage string   `json:"client_message"`
		Confidence    string   `json:"confidence"`
		ClientUnknown string   `json:"client_unknown"`
		Grep          []string `json:"grep"`
		Program       string   `json:"program"`
		Retries       string   `json:"retries"`
		OtherWordings []struct {
			By   string `json:"by"`
			Text string `json:"text"`
		} `json:"other_wordings"`
	} `json:"explain"`
	Diagnosis *struct {
		Verdict     string         `json:"verdict"`
		Cause       string         `json:"cause"`
		PortRange   string         `json:"port_range"`
		Usable      int            `json:"usable_ports"`
		InUse       int            `json:"in_use"`
		Free        int            `json:"free"`
		HeldForAll  int            `json:"held_for_all"`
		Unsure      int            `json:"unsure"`
		Exhausted   bool           `json:"exhausted"`
		SocketsFrom string         `json:"sockets_from"`
		Reserved    string         `json:"reserved_ports"`
		States      map[string]int `json:"states"`
		Holders     []struct {
			PID         int    `json:"pid"`
			Comm        string `json:"comm"`
			Sockets     int    `json:"sockets"`
			PodUID      string `json:"pod_uid"`
			ContainerID string `json:"container_id"`
		} `json:"holders"`
		RemotePod *struct {
			UID, Name, Namespace string
		} `json:"remote_pod"`
		NodeLayer   json.RawMessage `json:"node_layer"` // nodelayer_test.go reads it
		Addresses   []string        `json:"addresses"`
		Fix         []string        `json:"fix"`
		HostNetwork bool            `json:"host_network"`
		Shared      bool            `json:"shared"`
		Snapshot    string          `json:"snapshot_time"`
	} `json:"diagnosis"`
	Pod *struct {
		UID         string            `json:"uid"`
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Container   string            `json:"container"`
		ContainerID string            `json:"container_id"`
		Image       string            `json:"image"`
		QoS         string            `json:"qos"`
		Runtime     string            `json:"runtime"`
		Labels      map[string]string `json:"labels"`
		Via         string            `json:"via"`
		// NamesUnresolved: why the runtime's names are missing.
		NamesUnresolved string `json:"names_unresolved"`
	} `json:"pod"`
	PodUnresolved string  `json:"pod_unresolved"`
	HostNetwork   bool    `json:"host_network"`
	Suppressed    int     `json:"suppressed"`
	Attempt       int     `json:"attempt"`
	Async         bool    `json:"async"`
	Interrupted   bool    `json:"interrupted"`
	AsyncAfterMs  float64 `json:"async_after_ms"`
	NetNS         uint64  `json:"netns"`
	MntNS         uint64  `json:"mntns"`
	Cgroup        struct {
		ID         uint64 `json:"id"`
		Path       string `json:"path"`
		Unresolved string `json:"unresolved"`
	} `json:"cgroup"`
}

type JSONAddr struct {
	IP         string `json:"ip"`
	Port       int    `json:"port"`
	Family     string `json:"family"`
	Path       string `json:"path"`
	Raw        string `json:"raw"`
	Unreadable bool   `json:"unreadable"`
	Addrlen    int    `json:"addrlen"`
}
