package signers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
)

// Errors of the Manager's changes, for the API's answers.
var (
	// ErrInvalid: the declaration cannot work (400).
	ErrInvalid = errors.New("invalid wallet declaration")
	// ErrConfigured: the wallet is the configuration's, changed there (409).
	ErrConfigured = errors.New("the wallet is declared by the configuration: change it there")
	// ErrTaken: the name, or the chain and address, are another wallet's (409).
	ErrTaken = store.ErrWalletTaken
)

// Chain is a chain the lane sends on, by the configuration's name.
type Chain struct {
	Name string
	ID   int64
}

// ManagerConfig is what a Manager needs.
type ManagerConfig struct {
	Store    *store.Store
	Opener   *Opener
	Registry *keystore.Registry
	// Chains are the lane's chains; a declaration that names none goes to
	// the only one.
	Chains []Chain
	// Configured are the configuration's wallets, by name, with where
	// their keys are (backend, key) for the listing.
	Configured map[string]Decl
	// Interval is how often the table is read without a notification
	// (default 5 s); Wake is the ledgerq_wallets subscription.
	Interval time.Duration
	Wake     <-chan struct{}
	// OpenTimeout bounds one signer's opening (default 30 s).
	OpenTimeout time.Duration
	Clock       clock.Clock
	Logger      *slog.Logger
}

// Manager keeps the wallets added at run time (ledgerq.wallets) in the
// registry: it reads the table (Start: at once, then on each notification
// and every Interval), opens the signers of new rows, takes out removed
// ones, and follows disabled. Add, SetDisabled and Remove change the table
// for the API, and this process's registry at once.
type Manager struct {
	cfg  ManagerConfig
	loop *loop.Loop

	// sync holds one reading of the table at a time; mu guards the maps.
	sync   sync.Mutex
	mu     sync.Mutex
	rows   map[string]store.WalletDecl // the table, as last read
	loaded map[string]loadedWallet     // the rows whose signer is in the registry
	failed map[string]string           // rows this process could not open: why
}

type loadedWallet struct {
	row    store.WalletDecl
	signer keystore.Signer
}

// NewManager returns a Manager of cfg.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	if cfg.Store == nil || cfg.Opener == nil || cfg.Registry == nil {
		return nil, errors.New("signers: a manager needs a store, an opener and a registry")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.OpenTimeout <= 0 {
		cfg.OpenTimeout = 30 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{cfg: cfg, rows: map[string]store.WalletDecl{}, loaded: map[string]loadedWallet{}, failed: map[string]string{}}
	m.loop = loop.New(loop.Config{Name: "wallets", Interval: cfg.Interval, Wake: cfg.Wake, Logger: cfg.Logger}, func(ctx context.Context) (bool, error) {
		return false, m.Sync(ctx)
	})
	return m, nil
}

// Start starts the loop, which reads the table at once and then on each
// notification and every Interval. Call Sync first for the wallets to be
// there before the lanes start.
func (m *Manager) Start(ctx context.Context) error { return m.loop.Start(ctx) }

// Stop stops the loop.
func (m *Manager) Stop() { m.loop.Stop() }

// Sync reads the table once and brings the registry in line with it.
func (m *Manager) Sync(ctx context.Context) error {
	m.sync.Lock()
	defer m.sync.Unlock()
	rows, err := m.cfg.Store.WalletsList(ctx)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.Name] = true
		m.apply(ctx, r)
	}
	m.mu.Lock()
	var gone []loadedWallet
	for name, lw := range m.loaded {
		if !seen[name] {
			gone = append(gone, lw)
			delete(m.loaded, name)
		}
	}
	for name := range m.failed {
		if !seen[name] {
			delete(m.failed, name)
		}
	}
	m.rows = map[string]store.WalletDecl{}
	for _, r := range rows {
		m.rows[r.Name] = r
	}
	m.mu.Unlock()
	for _, lw := range gone {
		m.unload(lw)
	}
	return nil
}

// apply brings one row into the registry: opens its signer when it is new
// or its key changed, or only follows its disabled flag.
func (m *Manager) apply(ctx context.Context, r store.WalletDecl) {
	if _, ok := m.cfg.Configured[r.Name]; ok {
		m.fail(r.Name, "the configuration declares a wallet of this name: the configuration's is used")
		return
	}
	m.mu.Lock()
	lw, ok := m.loaded[r.Name]
	m.mu.Unlock()
	if ok && sameKey(lw.row, r) {
		if lw.row.Disabled != r.Disabled {
			m.put(r, lw.signer)
		}
		return
	}
	if ok {
		m.mu.Lock()
		delete(m.loaded, r.Name)
		m.mu.Unlock()
		m.unload(lw)
	}
	if id, ok := m.chainID(r.Chain); !ok || id != r.ChainID {
		m.fail(r.Name, fmt.Sprintf("chain %s (id %d) is not one this process sends on", r.Chain, r.ChainID))
		return
	}
	octx, cancel := context.WithTimeout(ctx, m.cfg.OpenTimeout)
	s, waiting, err := m.cfg.Opener.OpenOrWait(octx, declOf(r))
	cancel()
	if err != nil {
		m.fail(r.Name, err.Error())
		return
	}
	if waiting {
		m.cfg.Logger.Warn("wallets: a wallet's signer cannot be reached now; its tasks wait until it can", "wallet", r.Name, "backend", r.Backend, "error", s.(*Lazy).Pending())
	}
	if err := m.put(r, s); err != nil {
		closeSigner(s)
		m.fail(r.Name, err.Error())
	}
}

// put puts r's wallet, signed by s, in the registry and records it loaded.
func (m *Manager) put(r store.WalletDecl, s keystore.Signer) error {
	w := keystore.Wallet{ID: r.Name, ChainID: r.ChainID, Signer: s, Chain: r.Chain, Declared: true, Disabled: r.Disabled}
	if err := m.cfg.Registry.Put(w); err != nil {
		return err
	}
	m.mu.Lock()
	m.loaded[r.Name] = loadedWallet{row: r, signer: s}
	m.rows[r.Name] = r
	_, wasFailed := m.failed[r.Name]
	delete(m.failed, r.Name)
	m.mu.Unlock()
	if wasFailed {
		m.cfg.Logger.Info("wallets: wallet opened", "wallet", r.Name)
	}
	return nil
}

// unload takes lw's wallet out of the registry and closes its signer.
func (m *Manager) unload(lw loadedWallet) {
	if w, ok := m.cfg.Registry.ByID(lw.row.Name); ok && w.Signer == lw.signer {
		m.cfg.Registry.Remove(lw.row.Name)
	}
	closeSigner(lw.signer)
	m.cfg.Logger.Info("wallets: wallet removed", "wallet", lw.row.Name)
}

// fail records why name could not be opened, logging it when it changed.
func (m *Manager) fail(name, why string) {
	m.mu.Lock()
	before, had := m.failed[name]
	m.failed[name] = why
	m.mu.Unlock()
	if !had || before != why {
		m.cfg.Logger.Error("wallets: a wallet added at run time cannot be opened here; retrying", "wallet", name, "error", why)
	}
}

func sameKey(a, b store.WalletDecl) bool {
	return a.Chain == b.Chain && a.ChainID == b.ChainID && a.Address == b.Address && a.Backend == b.Backend && a.KeyRef == b.KeyRef
}

func declOf(r store.WalletDecl) Decl {
	return Decl{Name: r.Name, Chain: r.Chain, Backend: r.Backend, Key: r.KeyRef, Address: common.HexToAddress(r.Address), Declared: true}
}

// chainID is the id of the chain named name; "" names the only chain.
func (m *Manager) chainID(name string) (int64, bool) {
	if name == "" {
		if len(m.cfg.Chains) == 1 {
			return m.cfg.Chains[0].ID, true
		}
		return 0, false
	}
	for _, c := range m.cfg.Chains {
		if c.Name == name {
			return c.ID, true
		}
	}
	return 0, false
}

// Add declares a wallet at run time (disabled: taking no task yet): it opens d's signer here first (the
// key's address is derived and checked against d.Address when set), stores
// the row (audited; every process is notified) and puts the wallet in this
// process's registry.
func (m *Manager) Add(ctx context.Context, d Decl, disabled bool, audit *store.AuditEntry) (Entry, error) {
	d.Declared = true
	if err := d.Validate(); err != nil {
		return Entry{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if _, ok := m.cfg.Configured[d.Name]; ok {
		return Entry{}, fmt.Errorf("wallet %s: %w", d.Name, ErrConfigured)
	}
	if d.Chain == "" {
		if len(m.cfg.Chains) != 1 {
			return Entry{}, fmt.Errorf("%w: wallet %s: name its chain: the lane sends on %s", ErrInvalid, d.Name, m.chainNames())
		}
		d.Chain = m.cfg.Chains[0].Name
	}
	chainID, ok := m.chainID(d.Chain)
	if !ok {
		return Entry{}, fmt.Errorf("%w: wallet %s: chain %q is not declared (the lane sends on %s)", ErrInvalid, d.Name, d.Chain, m.chainNames())
	}
	if _, ok := m.cfg.Registry.ByID(d.Name); ok {
		return Entry{}, fmt.Errorf("wallet %s: %w", d.Name, ErrTaken)
	}
	octx, cancel := context.WithTimeout(ctx, m.cfg.OpenTimeout)
	s, err := m.cfg.Opener.Open(octx, d)
	cancel()
	if err != nil {
		return Entry{}, err
	}
	if other, ok := m.cfg.Registry.BySender(chainID, s.Address()); ok {
		closeSigner(s)
		return Entry{}, fmt.Errorf("wallet %s: wallet %s sends from %s on this chain: %w", d.Name, other.ID, common.Address(s.Address()).Hex(), ErrTaken)
	}
	by := "anonymous"
	if audit != nil && audit.KeyName != "" {
		by = audit.KeyName
	}
	row, err := m.cfg.Store.WalletsAdd(ctx, store.WalletDecl{
		Name: d.Name, Chain: d.Chain, ChainID: chainID, Address: common.Address(s.Address()).Hex(), Backend: d.Backend, KeyRef: d.Key, Disabled: disabled, CreatedBy: by,
	}, m.cfg.Clock.Now(), audit)
	if err != nil {
		closeSigner(s)
		return Entry{}, err
	}
	m.sync.Lock()
	defer m.sync.Unlock()
	m.mu.Lock()
	lw, read := m.loaded[row.Name]
	m.mu.Unlock()
	if read && sameKey(lw.row, row) {
		// The notification's reading opened it first: keep that one.
		closeSigner(s)
		return m.entry(row.Name)
	}
	if err := m.put(row, s); err != nil {
		// Another wallet of this process took the address meanwhile; the
		// row stays, and the next reading reports it.
		closeSigner(s)
		m.fail(row.Name, err.Error())
	}
	return m.entry(row.Name)
}

// SetDisabled disables or enables a wallet added at run time.
func (m *Manager) SetDisabled(ctx context.Context, name string, disabled bool, audit *store.AuditEntry) (Entry, error) {
	if _, ok := m.cfg.Configured[name]; ok {
		return Entry{}, fmt.Errorf("wallet %s: %w", name, ErrConfigured)
	}
	row, _, err := m.cfg.Store.WalletsSetDisabled(ctx, name, disabled, m.cfg.Clock.Now(), audit)
	if err != nil {
		return Entry{}, err
	}
	m.sync.Lock()
	defer m.sync.Unlock()
	m.mu.Lock()
	lw, ok := m.loaded[name]
	m.mu.Unlock()
	if ok && sameKey(lw.row, row) {
		if err := m.put(row, lw.signer); err != nil {
			return Entry{}, err
		}
	} else {
		m.mu.Lock()
		m.rows[name] = row
		m.mu.Unlock()
	}
	return m.entry(name)
}

// Remove removes a wallet added at run time; store.ErrWalletBusy while it
// has tasks that have not ended.
func (m *Manager) Remove(ctx context.Context, name string, audit *store.AuditEntry) error {
	if _, ok := m.cfg.Configured[name]; ok {
		return fmt.Errorf("wallet %s: %w", name, ErrConfigured)
	}
	if err := m.cfg.Store.WalletsRemove(ctx, name, m.cfg.Clock.Now(), audit); err != nil {
		return err
	}
	m.sync.Lock()
	defer m.sync.Unlock()
	m.mu.Lock()
	lw, ok := m.loaded[name]
	delete(m.loaded, name)
	delete(m.rows, name)
	delete(m.failed, name)
	m.mu.Unlock()
	if ok {
		m.unload(lw)
	}
	return nil
}

func (m *Manager) chainNames() string {
	names := make([]string, len(m.cfg.Chains))
	for i, c := range m.cfg.Chains {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

// Entry is one wallet as the listing shows it.
type Entry struct {
	Name      string
	Chain     string
	ChainID   int64
	Address   string
	Backend   string
	Key       string
	Source    string // "config" or "api"
	Disabled  bool
	Loaded    bool
	LoadError string
	CreatedBy string
	CreatedAt *time.Time
}

// List returns every wallet, the configuration's and the run time's, by
// name.
func (m *Manager) List() []Entry {
	var out []Entry
	for _, w := range m.cfg.Registry.All() {
		if w.Declared {
			continue
		}
		e := Entry{Name: w.ID, Chain: w.Chain, ChainID: w.ChainID, Address: common.Address(w.Address()).Hex(), Backend: keystore.BackendOf(w.Signer), Source: "config"}
		e.Loaded, e.LoadError = loadState(w.Signer)
		if d, ok := m.cfg.Configured[w.ID]; ok {
			e.Backend, e.Key = d.Backend, d.Key
		}
		out = append(out, e)
	}
	m.mu.Lock()
	names := make([]string, 0, len(m.rows))
	for name := range m.rows {
		if _, ok := m.cfg.Configured[name]; !ok {
			names = append(names, name)
		}
	}
	m.mu.Unlock()
	for _, name := range names {
		if e, err := m.entry(name); err == nil {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Entry returns one wallet's entry, the configuration's or the run time's.
func (m *Manager) Entry(name string) (Entry, error) {
	for _, e := range m.List() {
		if e.Name == name {
			return e, nil
		}
	}
	return Entry{}, store.ErrNotFound
}

// entry is the entry of the wallet added at run time named name.
func (m *Manager) entry(name string) (Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.rows[name]
	if !ok {
		return Entry{}, store.ErrNotFound
	}
	created := r.CreatedAt
	e := Entry{
		Name: r.Name, Chain: r.Chain, ChainID: r.ChainID, Address: common.HexToAddress(r.Address).Hex(), Backend: r.Backend, Key: r.KeyRef,
		Source: "api", Disabled: r.Disabled, CreatedBy: r.CreatedBy, CreatedAt: &created,
	}
	lw, loaded := m.loaded[name]
	e.Loaded, e.LoadError = loaded, m.failed[name]
	if loaded {
		e.Loaded, e.LoadError = loadState(lw.signer)
	}
	return e, nil
}

// loadState says whether s is open: a Lazy signer is not until its
// backend answered, and says why.
func loadState(s keystore.Signer) (loaded bool, why string) {
	if l, ok := s.(*Lazy); ok {
		if err := l.Pending(); err != nil {
			return false, err.Error()
		}
	}
	return true, ""
}
