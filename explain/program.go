package explain

import (
	"bytes"
)

// Interpreters run a program given in their arguments: a script, a module
// (python -m), a main class or jar (java) or inline code (-c, -e, -r). That
// program, not the interpreter, decides what is printed, so it is named.

// interpFlags says, per runtime, which options take a value in the next
// argument, which name the program (a module, a jar), and which mean inline
// code.
type interpFlags struct {
	withValue [][]byte // -X opt: skip opt
	names     [][]byte // -m mod, -jar app.jar: the program is "flag value"
	inline    [][]byte // -c, -e, -r: the program is inline code
}

var interpreters = map[string]interpFlags{
	runtimePython: {withValue: bs("-X", "-W"), names: bs("-m"), inline: bs("-c")},
	runtimeNode:   {withValue: bs("-r", "--require", "--import", "--loader"), inline: bs("-e", "--eval", "-p", "--print")},
	runtimePerl:   {withValue: bs("-I", "-M", "-m"), inline: bs("-e", "-E")},
	runtimeRuby:   {withValue: bs("-I", "-r", "-C"), inline: bs("-e")},
	runtimePHP:    {withValue: bs("-d", "-c", "-z"), names: bs("-f", "-S"), inline: bs("-r")},
	runtimeJava: {
		withValue: bs("-cp", "-classpath", "--class-path", "-p", "--module-path", "--add-opens",
			"--add-exports", "--add-modules", "--add-reads", "--enable-native-access"),
		names: bs("-jar", "-m", "--module"),
	},
}

func bs(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i := range s {
		out[i] = []byte(s[i])
	}
	return out
}

// appendProgram appends what the interpreter runtime runs, from args (argv,
// NUL-separated, as the kernel gave it: possibly cut short): "-m
// http.server", "server.js", "-jar app.jar", "com.example.Main", "-c"
// (inline code). ok is false when runtime is not an interpreter or args do
// not say (cut short before the program).
func appendProgram(b []byte, runtime string, args []byte) ([]byte, bool) {
	fl, ok := interpreters[runtime]
	if !ok {
		return b, false
	}
	// The last argument may have been cut by the 64-byte limit: a
	// truncated script name is still better than none, but a truncated
	// option is not an option.
	complete := len(args) > 0 && args[len(args)-1] == 0
	rest := args
	next := func() ([]byte, bool) {
		if len(rest) == 0 {
			return nil, false
		}
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			a := rest
			rest = nil
			return a, false
		}
		a := rest[:i]
		rest = rest[i+1:]
		return a, true
	}
	next() // argv[0]
	for {
		a, whole := next()
		if a == nil {
			return b, false
		}
		switch {
		case has(fl.inline, a):
			return append(b, a...), true
		case has(fl.names, a):
			v, vwhole := next()
			if v == nil {
				return b, false
			}
			b = append(append(b, a...), ' ')
			return appendBase(b, v, vwhole || complete), true
		case has(fl.withValue, a):
			next()
		case runtime == runtimePerl && len(a) > 2 && a[0] == '-' && a[1] == 'M' && whole:
			// perl -MLWP::Simple -e ...: the modules loaded say what runs.
			b = append(append(b, a...), ' ')
		case len(a) > 0 && a[0] == '-':
			if !whole {
				return b, false
			}
		default:
			return appendBase(b, a, whole || complete), true
		}
	}
}

// appendBase appends a script path's base name, marking a cut one.
func appendBase(b, path []byte, whole bool) []byte {
	b = append(b, baseName(path)...)
	if !whole {
		b = append(b, "..."...)
	}
	return b
}

func has(list [][]byte, a []byte) bool {
	for _, x := range list {
		if bytes.Equal(x, a) {
			return true
		}
	}
	return false
}
