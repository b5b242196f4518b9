// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title Reverter, every way a call can fail, for ledgerq's tests
/// @notice Each function fails in one way a caller must decode: a custom
/// error with arguments, Error(string) from require, Panic(uint256) from a
/// division by zero and from assert, or succeeds and emits an event. The
/// armed flag makes a call that passes at one state and reverts at the
/// next: arm() flips it, and failIfArmed() reverts only once it is set.
contract Reverter {
    /// @notice One entry of tally's list: a tuple argument.
    struct Item {
        address who;
        uint256 amount;
    }

    bool public armed;
    uint256 public counter;
    uint256 public total;

    event Done(address indexed caller, uint256 indexed counter, string note);
    event Armed(address indexed by, bool armed);

    error QuotaExceeded(address who, uint256 need, uint256 have);
    error IsArmed(uint256 counter);

    /// @notice Reverts with QuotaExceeded(msg.sender, need, have) when need
    /// exceeds have; else counts and emits Done.
    function quota(uint256 need, uint256 have) external returns (uint256) {
        if (need > have) revert QuotaExceeded(msg.sender, need, have);
        return _done("quota");
    }

    /// @notice Reverts with Error(message) unless ok.
    function requireOk(bool ok, string calldata message) external returns (uint256) {
        require(ok, message);
        return _done(message);
    }

    /// @notice Divides a by b: Panic(0x12) when b is zero.
    function divide(uint256 a, uint256 b) external returns (uint256) {
        uint256 q = a / b;
        _done("divide");
        return q;
    }

    /// @notice Panic(0x01) unless ok.
    function assertOk(bool ok) external returns (uint256) {
        assert(ok);
        return _done("assert");
    }

    /// @notice Always succeeds: counts and emits Done(msg.sender, counter, note).
    function succeed(string calldata note) external returns (uint256) {
        return _done(note);
    }

    /// @notice Adds up the items' amounts into total (a call that takes an
    /// array of tuples), counts and emits Done.
    function tally(Item[] calldata items) external returns (uint256) {
        for (uint256 i = 0; i < items.length; i++) {
            total += items[i].amount;
        }
        return _done("tally");
    }

    /// @notice Sets or clears the flag failIfArmed reads.
    function arm(bool on) external {
        armed = on;
        emit Armed(msg.sender, on);
    }

    /// @notice Reverts with IsArmed(counter) while armed; else counts and
    /// emits Done.
    function failIfArmed() external returns (uint256) {
        if (armed) revert IsArmed(counter);
        return _done("not armed");
    }

    function _done(string memory note) private returns (uint256) {
        counter += 1;
        emit Done(msg.sender, counter, note);
        return counter;
    }
}
