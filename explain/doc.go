// Package explain says what the failing program printed and why it read
// that way: it identifies the client from its binary (ELF analysis, the
// Detector's cache per executable), renders the line from the client
// catalog (catalog.json) with the errno text of the program's libc (the
// generated glibc and musl strerror tables, or Go's own), and gives the
// errno's meaning for that syscall and protocol. `eaddr explain` identifies
// a pasted line with the same catalog. It knows nothing of the kernel or of
// eaddr's output.
package explain
