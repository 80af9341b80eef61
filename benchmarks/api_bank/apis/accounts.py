"""API-Bank account and bank APIs over ``init_database/Account.json`` and ``Bank.json``.

Account table: ``username -> {password, token, email}``; tokens authenticate the calendar APIs
(`user_of`). Behaviour follows the API descriptions in the
level-1 prompts; the messages are the benchmark's (they appear in recorded results).
"""
from __future__ import annotations

import hashlib
from typing import Any

from genenv.benchmarks.api_bank.apis.base import Api, ApiError, register_api

__all__ = []  # the API classes are reached by name through API_CLASSES (register_api)

FORGOT_PASSWORD_CODE = 970420  # the benchmark's fixed verification code (recorded ForgotPassword outputs)


@register_api
class GetUserToken(Api):
    """``GetUserToken(username, password)`` -> ``{"token": ...}``."""

    name, database = "GetUserToken", "Account"

    def run(self, rt, username: str, password: str) -> Any:
        accounts = rt.table("Account")
        if username not in accounts:
            raise ApiError("The username does not exist.")
        if accounts[username]["password"] != password:
            raise ApiError("The password is incorrect.")
        return {"token": accounts[username]["token"]}


@register_api
class RegisterUser(Api):
    """``RegisterUser(username, password, email)`` -> ``{"token": <new token>}``. The token is derived from the
    username (deterministic, unlike the original's random one); results are compared without it."""

    name, database = "RegisterUser", "Account"

    def run(self, rt, username: str, password: str, email: str) -> Any:
        accounts = rt.table("Account")
        if username in accounts:
            raise ApiError("The username already exists.")
        token = hashlib.sha1(f"{username}:{email}".encode()).hexdigest()[:18]
        accounts[username] = {"password": password, "token": token, "email": email}
        return {"token": token}


@register_api
class DeleteAccount(Api):
    """``DeleteAccount(token)`` -> ``{"status": "success"}``."""

    name, database = "DeleteAccount", "Account"

    def run(self, rt, token: str) -> Any:
        user = rt.user_of(token)
        del rt.table("Account")[user]
        return {"status": "success"}


@register_api
class ModifyPassword(Api):
    """``ModifyPassword(token, old_password, new_password)`` -> ``{"status": "success"}``."""

    name, database = "ModifyPassword", "Account"

    def run(self, rt, token: str, old_password: str, new_password: str) -> Any:
        user = rt.user_of(token)
        record = rt.table("Account")[user]
        if record["password"] != old_password:
            raise ApiError("The old password is incorrect.")
        record["password"] = new_password
        return {"status": "success"}


@register_api
class ForgotPassword(Api):
    """Two-step password reset: ``status="Forgot Password"`` with username and email returns the verification
    code; ``status="Verification Code"`` with that code and ``new_password`` sets the password."""

    name, database = "ForgotPassword", "Account"

    def run(self, rt, status: str, username: str | None = None, email: str | None = None,
            verification_code: int | None = None, new_password: str | None = None) -> Any:
        accounts = rt.table("Account")
        if status == "Forgot Password":
            if username is None or email is None:
                raise ApiError("The username and email are required for the first call.")
            if username not in accounts:
                raise ApiError("The username does not exist.")
            if accounts[username]["email"] != email:
                raise ApiError("The email is incorrect.")
            rt.memory["forgot_password_user"] = username
            return FORGOT_PASSWORD_CODE
        if status == "Verification Code":
            user = rt.memory.get("forgot_password_user")
            if user is None:
                raise ApiError("You need to call the API with status 'Forgot Password' at first.")
            if new_password is None or verification_code is None:
                raise ApiError("The new password and verification code are required for the second call.")
            if verification_code != FORGOT_PASSWORD_CODE:
                raise ApiError("The verification code is incorrect.")
            accounts[user]["password"] = new_password
            return "success"
        raise ApiError("The status is only 'Forgot Password' or 'Verification Code'.")


@register_api
class QueryBalance(Api):
    """``QueryBalance(token)`` -> the balance (float) of the user's bank account (``Bank.json``)."""

    name, database = "QueryBalance", "Bank"

    def run(self, rt, token: str) -> Any:
        try:  # the released backend calls token.strip() and discards the result: a padded token is refused
            user = rt.user_of(token)
        except ApiError:
            raise ApiError("The token is incorrect.") from None
        bank = rt.table("Bank")
        if user not in bank:
            raise ApiError("The user does not have an account.")
        return bank[user]["balance"]


@register_api
class OpenBankAccount(Api):
    """``OpenBankAccount(account, password, name)`` -> ``"success"``, or ``"failed"`` if the account exists.
    The accounts table starts with the one account ``test`` (the benchmark's initial state)."""

    name = "OpenBankAccount"

    def run(self, rt, account: str, password: str, name: str) -> Any:
        rows = rt.memory.setdefault("bank_accounts", {"test": {"password": "test", "name": "yifei"}})
        if account in rows:
            return "failed"
        rows[account] = {"password": password, "name": name}
        return "success"
