package httpapi

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
	"github.com/ledgerq/ledgerq/internal/store"
)

// bundleJSON is apigen.Bundle as the API writes it: times by apiTime (see
// batchJSON).
type bundleJSON struct {
	apigen.Bundle
	NextSubmitAt  *apiTime            `json:"next_submit_at,omitempty"`
	CreatedAt     apiTime             `json:"created_at"`
	SubmittedAt   *apiTime            `json:"submitted_at,omitempty"`
	GuaranteedAt  *apiTime            `json:"guaranteed_at,omitempty"`
	AccumulatedAt *apiTime            `json:"accumulated_at,omitempty"`
	FinalizedAt   *apiTime            `json:"finalized_at,omitempty"`
	UpdatedAt     apiTime             `json:"updated_at"`
	Versions      []bundleVersionJSON `json:"versions,omitempty"`
}

type bundleVersionJSON struct {
	apigen.BundleVersion
	SubmittedAt apiTime `json:"submitted_at"`
}

type bundlePageJSON struct {
	Bundles   []bundleJSON `json:"bundles"`
	NextAfter *int64       `json:"next_after,omitempty"`
}

// toBundle converts a stored bundle to the API's Bundle.
func toBundle(b store.Bundle) bundleJSON {
	o := apigen.Bundle{
		ChainID: b.ChainID, Number: int64(b.Number), Hash: b.Hash.Hex(), Parent: b.Parent.Hex(),
		State: apigen.BundleState(b.State), Version: b.Version, TxCount: b.TxCount, Core: b.Core,
		GuaranteedVersion: b.GuaranteedVersion, SubmitFailures: b.SubmitFailures, DropReason: omitZero(b.DropReason),
	}
	if b.Anchor != nil {
		o.AnchorSlot = ptr(int64(b.Anchor.Number))
	}
	if b.GuaranteedHash != nil {
		o.GuaranteedPackage = ptr(b.GuaranteedHash.Hex())
	}
	if b.AccumulatedSlot != nil {
		o.AccumulatedSlot = ptr(int64(*b.AccumulatedSlot))
	}
	out := bundleJSON{Bundle: o, CreatedAt: apiTime(b.CreatedAt), UpdatedAt: apiTime(b.UpdatedAt),
		SubmittedAt: apiTimePtr(b.SubmittedAt), GuaranteedAt: apiTimePtr(b.GuaranteedAt),
		AccumulatedAt: apiTimePtr(b.AccumulatedAt), FinalizedAt: apiTimePtr(b.FinalizedAt)}
	if b.State == store.BundleQueued {
		out.NextSubmitAt = apiTimePtr(&b.NextSubmitAt)
	}
	return out
}

// GetBundle answers GET /v1/bundles/{block}.
func (s *Server) GetBundle(c echo.Context, block string) error {
	if s.pool == nil {
		return errLaneOff
	}
	n, err := strconv.ParseUint(block, 10, 63)
	if err != nil || n == 0 {
		return errorf(http.StatusBadRequest, "path parameter block: want a block number from 1 to %d", int64(math.MaxInt64))
	}
	ctx := c.Request().Context()
	b, err := s.store.BundleGet(ctx, s.pool.ChainID, n)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, "no bundle has block number %d", n)
	}
	if err != nil {
		return err
	}
	hashes, err := s.store.BundleTxListHashes(ctx, b.ID)
	if err != nil {
		return err
	}
	versions, err := s.store.BundleVersionList(ctx, b.ID)
	if err != nil {
		return err
	}
	out := toBundle(b)
	out.Txs = ptr(make([]string, len(hashes)))
	for i, h := range hashes {
		(*out.Txs)[i] = h.Hex()
	}
	out.Versions = make([]bundleVersionJSON, len(versions))
	for i, v := range versions {
		vj := apigen.BundleVersion{Version: v.Version, PackageHash: v.PackageHash.Hex(), Core: v.Core, AnchorSlot: int64(v.Anchor.Number),
			Outcome: omitZero(v.Outcome)}
		if v.GuaranteedSlot != nil {
			vj.GuaranteedSlot = ptr(int64(*v.GuaranteedSlot))
		}
		out.Versions[i] = bundleVersionJSON{BundleVersion: vj, SubmittedAt: apiTime(v.SubmittedAt)}
	}
	return c.JSON(http.StatusOK, out)
}

// ListBundles answers GET /v1/bundles.
func (s *Server) ListBundles(c echo.Context, params apigen.ListBundlesParams) error {
	if s.pool == nil {
		return errLaneOff
	}
	p := store.BundleListParams{ChainID: s.pool.ChainID}
	if st := deref(params.State); st != "" {
		if !st.Valid() {
			return errorf(http.StatusBadRequest, "query parameter state: want queued, submitted, guaranteed, accumulated, finalized or dropped, got %q", st)
		}
		p.State = store.BundleState(st)
	}
	if a := deref(params.After); a != "" {
		n, err := strconv.ParseUint(a, 10, 63)
		if err != nil {
			return errorf(http.StatusBadRequest, "query parameter after: want a block number from 0 to %d", int64(math.MaxInt64))
		}
		p.After = n
	}
	var page bundlePageJSON
	var err error
	page.Bundles, page.NextAfter, err = listPage(c, params.Limit, func(ctx context.Context, limit int) ([]store.Bundle, error) {
		p.Limit = limit
		return s.store.BundleList(ctx, p)
	}, toBundle, func(b store.Bundle) int64 { return int64(b.Number) })
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}
