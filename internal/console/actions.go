package console

import (
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/store"
)

// The actions the rules allow, nothing more: each is a page that says what
// will happen and a POST that does it, through the store method the API
// uses, with the audit entry written in the same transaction.

type confirmData struct {
	Question string
	Details  [][2]string
	// Warning is what the operator should know before confirming.
	Warning string
	Action  string
	Button  string
	Back    string
	Danger  bool
}

func (c *Console) confirm(ec echo.Context, title string, d confirmData) error {
	return c.render(ec, http.StatusOK, "confirm.html", page{Title: title, Nav: "wallets", Data: d})
}

func (c *Console) confirmCancel(ec echo.Context) error {
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	w, t, ok, err := c.task404(ctx, ec)
	if !ok {
		return err
	}
	id := ec.Param("id")
	back := Prefix + "/wallets/" + pathEscape(w.ID) + "/tasks/" + id
	warning := "The task ends in Error (cancelled) and is never sent; its webhook endpoints get a failed event. This cannot be undone: the client would have to send the task again."
	switch t.Status {
	case store.TaskWaiting:
	case store.TaskExecuting:
		warning = "The task's transaction is out. Its wallet sends a no-op (0 value to the wallet itself) at the same nonce with higher fees; " +
			"if the chain mines the no-op, the task ends in Error (cancelled) and the no-op's fee is paid; if the task's own transaction is mined first, the task ends Done all the same."
	default:
		return c.fail(ec, http.StatusConflict, "Task "+id+" is "+t.Status.String()+": an ended task cannot be cancelled.")
	}
	return c.confirm(ec, "Cancel task", confirmData{
		Question: "Cancel task " + id + "?",
		Details:  [][2]string{{"Wallet", w.ID}, {"Status", t.Status.String()}, {"To", t.Request.To}, {"Value (wei)", bigString(t.Request.Value)}, {"Priority", itoa(int64(t.Priority))}, {"Created", t.CreatedAt.Format("2006-01-02 15:04:05 MST")}},
		Warning:  warning,
		Action:   back + "/cancel", Button: "Cancel task", Back: back, Danger: true,
	})
}

func (c *Console) cancelTask(ec echo.Context) error {
	w, err := c.wallet404(ec)
	if err != nil || w.ID == "" {
		return err
	}
	s, _ := sessionOf(ec)
	id := ec.Param("id")
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	_, outcome, err := c.store.TaskRequestCancel(ctx, store.TaskCancelParams{Now: c.clock.Now(), Wallet: w.ID, ID: id, Audit: s.audit()})
	if _, ok := errors.AsType[*store.TaskBeingSignedError](err); ok {
		return c.fail(ec, http.StatusConflict, "Task "+id+" of wallet "+w.ID+" is not cancelled: its transaction is being signed. It goes on.")
	}
	if _, ok := errors.AsType[*store.TaskRefusedError](err); ok {
		return ec.Redirect(http.StatusSeeOther, Prefix+"/wallets/"+pathEscape(w.ID)+"/tasks/"+id+"?done=not-waiting")
	}
	if err != nil {
		return c.storeFail(ec, "Task "+id+" of wallet "+w.ID, err)
	}
	done := "cancelled"
	switch outcome {
	case store.CancelledNow:
		c.logger.Info("console: task cancelled", "wallet", w.ID, "task_id", id, "key_name", s.who())
	case store.CancelRequested:
		done = "cancel-requested"
		c.logger.Info("console: cancel of a sent task requested", "wallet", w.ID, "task_id", id, "key_name", s.who())
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"/wallets/"+pathEscape(w.ID)+"/tasks/"+id+"?done="+done)
}

func (c *Console) confirmHold(ec echo.Context) error {
	return c.confirmHoldOrRelease(ec, true)
}

func (c *Console) confirmRelease(ec echo.Context) error {
	return c.confirmHoldOrRelease(ec, false)
}

func (c *Console) confirmHoldOrRelease(ec echo.Context, hold bool) error {
	w, err := c.wallet404(ec)
	if err != nil || w.ID == "" {
		return err
	}
	back := Prefix + "/wallets/" + pathEscape(w.ID)
	details := [][2]string{{"Wallet", w.ID}, {"Address", w.Address().Hex()}, {"Chain", itoa(w.ChainID)}}
	if hold {
		return c.confirm(ec, "Pause wallet", confirmData{
			Question: "Pause wallet " + w.ID + "?", Details: details,
			Warning: "From its next cycle the wallet sends no new task: waiting tasks stay waiting. Transactions already sent are still confirmed, bumped and sent again. Resume it from its page.",
			Action:  back + "/hold", Button: "Pause wallet", Back: back, Danger: true,
		})
	}
	return c.confirm(ec, "Resume wallet", confirmData{
		Question: "Resume wallet " + w.ID + "?", Details: details,
		Warning: "The wallet's waiting tasks are sent again, in their order. A wallet paused for its balance stays paused until its balance is enough.",
		Action:  back + "/release", Button: "Resume wallet", Back: back,
	})
}

func (c *Console) holdWallet(ec echo.Context) error {
	return c.holdOrRelease(ec, true)
}

func (c *Console) releaseWallet(ec echo.Context) error {
	return c.holdOrRelease(ec, false)
}

func (c *Console) holdOrRelease(ec echo.Context, hold bool) error {
	w, err := c.wallet404(ec)
	if err != nil || w.ID == "" {
		return err
	}
	s, _ := sessionOf(ec)
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	p := store.WalletHoldParams{Now: c.clock.Now(), ChainID: w.ChainID, Sender: w.Address().Hex(), Wallet: w.ID, Audit: s.audit()}
	var changed bool
	done := map[bool]string{true: "held", false: "already-held"}
	if hold {
		_, changed, err = c.store.WalletHealthHold(ctx, p)
	} else {
		_, changed, err = c.store.WalletHealthRelease(ctx, p)
		done = map[bool]string{true: "released", false: "not-held"}
	}
	if err != nil {
		return c.storeFail(ec, "wallet "+w.ID, err)
	}
	if changed {
		c.logger.Info("console: wallet "+done[true], "wallet", w.ID, "key_name", s.who())
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"/wallets/"+pathEscape(w.ID)+"?done="+done[changed])
}

// delivery404 returns the delivery named by the path if it belongs to the
// wallet's endpoint: one of another endpoint is not found.
func (c *Console) delivery404(ec echo.Context) (string, store.WebhookDeliveryState, error) {
	w, err := c.wallet404(ec)
	if err != nil || w.ID == "" {
		return "", store.WebhookDeliveryState{}, err
	}
	ep, err := c.endpointOf(ec, w.ID, ec.Param("endpoint"))
	if err != nil {
		return "", store.WebhookDeliveryState{}, c.storeFail(ec, "Webhook endpoint "+ec.Param("endpoint")+" of wallet "+w.ID, err)
	}
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	d, err := c.store.WebhookDeliveryGet(ctx, ec.Param("id"))
	if err == nil && d.EndpointID != ep.ID {
		err = store.ErrNotFound
	}
	if err != nil {
		return "", d, c.storeFail(ec, "Delivery "+ec.Param("id"), err)
	}
	return Prefix + "/wallets/" + pathEscape(w.ID) + "/webhooks/" + pathEscape(ep.ID), d, nil
}

func (c *Console) confirmRetry(ec echo.Context) error {
	back, d, err := c.delivery404(ec)
	if err != nil || back == "" {
		return err
	}
	if d.GaveUpAt == nil {
		return c.fail(ec, http.StatusConflict, "Delivery "+d.ID+" is not given up (it is pending or delivered): there is nothing to send again.")
	}
	return c.confirm(ec, "Send delivery again", confirmData{
		Question: "Send delivery " + d.ID + " again?",
		Details: [][2]string{{"Event", string(d.Type)}, {"Task", d.TaskID}, {"Attempts", itoa(int64(d.Attempts))},
			{"Last status", itoa(int64(d.LastStatus))}, {"Last error", d.LastError}},
		Warning: "Its attempts start over, due now, with the same webhook-id: a receiver that got it before sees the same id again.",
		Action:  back + "/deliveries/" + pathEscape(d.ID) + "/retry", Button: "Send again", Back: back,
	})
}

func (c *Console) retryDelivery(ec echo.Context) error {
	back, d, err := c.delivery404(ec)
	if err != nil || back == "" {
		return err
	}
	s, _ := sessionOf(ec)
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	retried, err := c.store.WebhookDeliveryRetry(ctx, store.WebhookDeliveryRetryParams{Now: c.clock.Now(), ID: d.ID, Audit: s.audit()})
	if err != nil {
		return c.storeFail(ec, "Delivery "+d.ID, err)
	}
	done := "not-given-up"
	if retried {
		done = "retried"
		c.logger.Info("console: webhook delivery sent again", "delivery_id", d.ID, "key_name", s.who())
	}
	return ec.Redirect(http.StatusSeeOther, back+"?done="+done)
}

func pathEscape(s string) string  { return url.PathEscape(s) }
func queryEscape(s string) string { return url.QueryEscape(s) }

// shortID shortens a long id for a title.
func shortID(s string) string {
	if len(s) <= 18 {
		return s
	}
	return s[:10] + "…" + s[len(s)-6:]
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// speedUpForm is the speed-up form of an executing task's page: the fees
// of its transaction out (Live), the least a replacement must offer by
// geth's rule (Least), and the fields, in gwei, filled with Least.
type speedUpForm struct {
	Live, Least store.SpeedUpFees
	MaxFee, Tip string
}

// speedUpFormOf returns the task's speed-up form, or nil when a speed-up
// would be refused: the task is not executing, a cancel or a speed-up is
// asked of it already, or its transaction is not out or mined already.
func speedUpFormOf(t store.Task, attempts []store.Attempt) *speedUpForm {
	if t.Status != store.TaskExecuting || t.CancelRequestedAt != nil || t.SpeedUp != nil {
		return nil
	}
	for i := len(attempts) - 1; i >= 0; i-- {
		a := attempts[i]
		if a.TaskID != t.ID || a.SupersededBy != "" || a.State != store.AttemptSent {
			continue
		}
		f := &speedUpForm{
			Live:  store.SpeedUpFees{FeeCap: a.MaxFeePerGas, TipCap: a.MaxPriorityFeePerGas},
			Least: store.SpeedUpFees{FeeCap: store.LeastReplacing(a.MaxFeePerGas), TipCap: store.LeastReplacing(a.MaxPriorityFeePerGas)},
		}
		f.MaxFee, f.Tip = gweiExact(f.Least.FeeCap), gweiExact(f.Least.TipCap)
		return f
	}
	return nil
}

// speedUpTask asks the wallet's worker to sign the executing task's
// transaction again with the fees posted (max_fee and tip, in gwei),
// through store.TaskRequestSpeedUp as the API's POST …/speed-up, audited.
// Fees the form refuses re-render the task's page with the problem and the
// fees typed.
func (c *Console) speedUpTask(ec echo.Context) error {
	w, err := c.wallet404(ec)
	if err != nil || w.ID == "" {
		return err
	}
	s, _ := sessionOf(ec)
	id := ec.Param("id")
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	typed := &speedUpForm{MaxFee: strings.TrimSpace(ec.FormValue("max_fee")), Tip: strings.TrimSpace(ec.FormValue("tip"))}
	fees, problem := c.speedUpFees(typed)
	if problem != "" {
		return c.renderTask(ctx, ec, w.ID, http.StatusBadRequest, typed, problem)
	}
	_, err = c.store.TaskRequestSpeedUp(ctx, store.TaskSpeedUpParams{Now: c.clock.Now(), Wallet: w.ID, ID: id, Fees: fees, Audit: s.audit()})
	if low, ok := errors.AsType[*store.SpeedUpTooLowError](err); ok {
		return c.renderTask(ctx, ec, w.ID, http.StatusConflict, typed, "Not sped up: these fees would not replace the task's transaction in a node's pool. "+
			"The max fee must be at least "+gweiExact(low.Min.FeeCap)+" gwei and the tip at least "+gweiExact(low.Min.TipCap)+" gwei (10% above the transaction's).")
	}
	if refused, ok := errors.AsType[*store.TaskRefusedError](err); ok {
		return c.renderTask(ctx, ec, w.ID, http.StatusConflict, nil, "Not sped up: "+refused.Reason+".")
	}
	if err != nil {
		return c.storeFail(ec, "Task "+id+" of wallet "+w.ID, err)
	}
	c.logger.Info("console: speed-up of a sent task requested", "wallet", w.ID, "task_id", id, "key_name", s.who(),
		"max_fee_per_gas", fees.FeeCap.String(), "max_priority_fee_per_gas", fees.TipCap.String())
	return ec.Redirect(http.StatusSeeOther, Prefix+"/wallets/"+pathEscape(w.ID)+"/tasks/"+id+"?done=speed-up-requested")
}

// speedUpFees reads the form's fees, or says what is wrong with them.
func (c *Console) speedUpFees(f *speedUpForm) (store.SpeedUpFees, string) {
	feeCap, ok := parseGwei(f.MaxFee)
	if !ok {
		return store.SpeedUpFees{}, "Max fee: give a number of gwei, such as 30 or 5.5 (at most 9 decimals)."
	}
	tip, ok := parseGwei(f.Tip)
	if !ok {
		return store.SpeedUpFees{}, "Tip: give a number of gwei, such as 2 or 1.5 (at most 9 decimals)."
	}
	if tip.Cmp(feeCap) > 0 {
		return store.SpeedUpFees{}, "The tip must not be above the max fee."
	}
	if ceiling := c.cfg.MaxFeePerGas; ceiling != nil && feeCap.Cmp(ceiling) > 0 {
		return store.SpeedUpFees{}, "The max fee is above this server's ceiling of " + gweiExact(ceiling) + " gwei (--wallet-max-fee-per-gas)."
	}
	return store.SpeedUpFees{FeeCap: feeCap, TipCap: tip}, ""
}

// gweiNumber is what the form takes: gwei with at most 9 decimals, so it is
// a whole number of wei.
var gweiNumber = regexp.MustCompile(`^[0-9]{1,30}(\.[0-9]{1,9})?$`)

// parseGwei parses gwei as the form takes it into wei.
func parseGwei(s string) (*big.Int, bool) {
	if !gweiNumber.MatchString(s) {
		return nil, false
	}
	whole, frac, _ := strings.Cut(s, ".")
	wei, ok := new(big.Int).SetString(whole+frac+strings.Repeat("0", 9-len(frac)), 10)
	return wei, ok
}

// gweiExact writes wei in gwei with every decimal it needs (none to nine),
// as parseGwei reads it back.
func gweiExact(wei *big.Int) string {
	q, r := new(big.Int).QuoRem(wei, big.NewInt(1e9), new(big.Int))
	if r.Sign() == 0 {
		return q.String()
	}
	return q.String() + "." + strings.TrimRight(fmt.Sprintf("%09d", r.Int64()), "0")
}
