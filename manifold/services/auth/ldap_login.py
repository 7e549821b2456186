"""What an LDAP login needs from this server: the directory settings, and the local
account made for a directory user who has none.

As AList, that account is a general user with ``ldap_default_dir`` as base path and
``ldap_default_permission`` as permissions, not marked as the directory's, with a
random password (hashed here; AList v3.45 stores it in plain text): they log in
through LDAP only until an admin gives them a password.
"""

from __future__ import annotations

from manifold.db.repos import DuplicateError
from manifold.models import Role, User
from manifold.services.admin.settings import SettingsService
from manifold.services.auth.ldap import Directory
from manifold.services.auth.users import UserInput, UserService, random_password


def directory(settings: SettingsService) -> Directory:
    get = settings.get
    return Directory(
        server=get("ldap_server"),
        start_tls=settings.get_bool("ldap_start_tls"),
        manager_dn=get("ldap_manager_dn"),
        manager_password=get("ldap_manager_password"),
        search_base=get("ldap_user_search_base"),
        search_filter=get("ldap_user_search_filter") or "(uid=%s)",
    )


async def register(users: UserService, settings: SettingsService, username: str) -> User:
    data = UserInput(
        username=username,
        password=random_password(16),
        base_path=settings.get("ldap_default_dir") or "/",
        role=Role.GENERAL,
        permission=settings.get_int("ldap_default_permission", 0),
    )
    try:
        return await users.create(data)
    except DuplicateError:
        # The same person's first two logins at once: the other one made the account.
        made = await users.by_name(username)
        if made is None:
            raise
        return made
