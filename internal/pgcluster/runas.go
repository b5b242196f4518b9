//go:build unix

package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
)

// fallbackUser is the system account created when ledgerq runs as root and the
// machine has no "postgres" account.
const fallbackUser = "ledgerq"

// account is the unprivileged user that initdb and postgres run as when
// ledgerq runs as root. A nil *account means "run as ourselves".
type account struct {
	name     string
	uid, gid uint32
}

func (a *account) credential() *syscall.Credential {
	if a == nil {
		return nil
	}
	// An empty, non-nil Groups drops root's supplementary groups.
	return &syscall.Credential{Uid: a.uid, Gid: a.gid, Groups: []uint32{}}
}

func (a *account) chown(path string) error {
	if a == nil {
		return nil
	}
	if err := os.Chown(path, int(a.uid), int(a.gid)); err != nil {
		return fmt.Errorf("handing %s to user %s: %w", path, a.name, err)
	}
	return nil
}

// resolveAccount picks who runs PostgreSQL. It returns nil unless we are root.
// An existing data directory decides when no user was asked for, so a cluster
// created under one account keeps working.
func resolveAccount(ctx context.Context, requested, pgdata string, logger *slog.Logger) (*account, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}

	var dataOwner *syscall.Stat_t
	if info, err := os.Stat(pgdata); err == nil {
		dataOwner, _ = info.Sys().(*syscall.Stat_t)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("inspecting %s: %w", pgdata, err)
	}

	var acct *account
	var err error
	switch {
	case requested != "":
		acct, err = lookupAccount(requested)
		if err != nil {
			return nil, fmt.Errorf("run-as user %q (PostgreSQL does not run as root): %w", requested, err)
		}
	case dataOwner != nil && dataOwner.Uid != 0:
		if u, err := user.LookupId(strconv.FormatUint(uint64(dataOwner.Uid), 10)); err == nil {
			acct, err = accountOf(u)
			if err != nil {
				return nil, err
			}
		} else {
			acct = &account{name: "uid " + strconv.FormatUint(uint64(dataOwner.Uid), 10), uid: dataOwner.Uid, gid: dataOwner.Gid}
		}
	default:
		acct, err = lookupAccount("postgres")
		if errors.As(err, new(user.UnknownUserError)) {
			acct, err = ensureSystemAccount(ctx, fallbackUser, logger)
		}
		if err != nil {
			return nil, fmt.Errorf("choosing a user to run PostgreSQL as (it does not run as root): %w", err)
		}
	}

	if acct.uid == 0 {
		return nil, fmt.Errorf("run-as user %s is root, and PostgreSQL does not run as root", acct.name)
	}
	if dataOwner != nil && dataOwner.Uid != acct.uid {
		return nil, fmt.Errorf("data directory %s belongs to uid %d, not to %s (uid %d) who would run PostgreSQL; "+
			"run as its owner or chown -R it", pgdata, dataOwner.Uid, acct.name, acct.uid)
	}
	return acct, nil
}

func lookupAccount(name string) (*account, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("looking up user %s: %w", name, err)
	}
	return accountOf(u)
}

func accountOf(u *user.User) (*account, error) {
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s has uid %q: %w", u.Username, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s has gid %q: %w", u.Username, u.Gid, err)
	}
	return &account{name: u.Username, uid: uint32(uid), gid: uint32(gid)}, nil
}

// ensureSystemAccount creates a login-less system user. Another process may
// create it at the same moment, so a failed useradd is judged by looking the
// user up again.
func ensureSystemAccount(ctx context.Context, name string, logger *slog.Logger) (*account, error) {
	if acct, err := lookupAccount(name); err == nil {
		return acct, nil
	}
	useradd, err := exec.LookPath("useradd")
	if err != nil {
		return nil, fmt.Errorf("no user %q and no useradd to create it: create an unprivileged user and pass it as the run-as user: %w", name, err)
	}
	out, runErr := exec.CommandContext(ctx, useradd,
		"--system", "--user-group", "--no-create-home",
		"--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name).CombinedOutput()
	acct, err := lookupAccount(name)
	if err != nil {
		return nil, fmt.Errorf("creating system user %s with useradd: %w (%s)", name, errors.Join(runErr, err), bytesTrim(out))
	}
	if runErr == nil {
		logger.Info("pgcluster: created system user to run PostgreSQL", "user", name, "uid", acct.uid)
	}
	return acct, nil
}

// checkReachable returns an error naming the first directory on the way to
// dir that the account cannot search. Only mode bits are read: an ACL that
// would grant access is not seen.
func (a *account) checkReachable(dir string) error {
	if a == nil {
		return nil
	}
	var chain []string
	for p := dir; ; p = filepath.Dir(p) {
		chain = append(chain, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	slices.Reverse(chain)
	for _, p := range chain {
		info, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("inspecting %s: %w", p, err)
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			continue
		}
		var bit fs.FileMode
		switch {
		case st.Uid == a.uid:
			bit = 0o100
		case st.Gid == a.gid:
			bit = 0o010
		default:
			bit = 0o001
		}
		if info.Mode().Perm()&bit == 0 {
			return fmt.Errorf("directory %s (mode %#o, uid %d) cannot be entered by user %s, who runs PostgreSQL "+
				"because ledgerq runs as root: put the cluster under a directory that user can reach "+
				"(a directory Start creates itself is made reachable), or chmod o+x %s",
				p, info.Mode().Perm(), st.Uid, a.name, p)
		}
	}
	return nil
}
