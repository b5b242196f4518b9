// Package pgcluster runs a private PostgreSQL cluster from the PostgreSQL server
// programs installed on the machine. `ledgerq dev` uses it for its embedded
// database (a cluster under ./.ledgerq/, kept across runs) and the integration
// test helper uses it for a throwaway cluster when neither a database URL nor
// Docker is available.
//
// A cluster directory holds:
//
//	pgdata/             the PostgreSQL data directory (PGDATA)
//	superuser.password  the generated password of the superuser "ledgerq" (0600)
//	postgres.log        initdb output and the server's log
//
// The server is a child process of ledgerq, not a daemon: it is started as
// `postgres -D …` (never through `pg_ctl start`), listens on 127.0.0.1 only with
// Unix sockets off, and asks for a SCRAM password. On Linux the kernel sends it
// SIGINT (fast shutdown) when ledgerq dies, even by SIGKILL, so a dev database
// never outlives the process that owns it. It runs in its own process group, so
// a Ctrl-C in the terminal reaches ledgerq only and ledgerq decides when the
// database stops.
//
// PostgreSQL refuses to run as root. When ledgerq runs as root (containers, CI),
// initdb and postgres run as an unprivileged user instead: see Options.RunAsUser.
package pgcluster
