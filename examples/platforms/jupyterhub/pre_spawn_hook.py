# A KubeSpawner pre_spawn_hook that brings a returning user's home back
# from the janitor's rescue before the spawner looks for the claim
# (docs/platforms.md#jupyterhub-kubespawner).
#
# Load it in the hub's configuration, e.g. with zero-to-jupyterhub:
#
#   hub:
#     extraConfig:
#       pvc-janitor: |
#         exec(open("/usr/local/etc/jupyterhub/pvc-janitor/pre_spawn_hook.py").read())
#
# with this file mounted there (hub.extraFiles or hub.extraVolumes), the
# `janitor` binary on the hub's PATH (a hub image built FROM the chart's
# with the release archive's binary added), and the hub's ServiceAccount
# bound to the Role and ClusterRole of examples/restore-role.yaml in the
# users' namespace.
#
# Why: KubeSpawner names the claim claim-<user> and, when it is missing,
# creates it empty (kubespawner 7.0 and earlier, and 7.1 for a spawner
# without saved state); kubespawner 7.1 remembers that the claim existed and
# then does not create it at all, so the pod waits for a claim that never
# comes. Either way the home is not back until the claim is restored first:
# KubeSpawner then finds it (a create answered 409 is success to it) and
# mounts it.

import asyncio

from kubernetes_asyncio.client.rest import ApiException

JANITOR = ["janitor"]
# The janitor's own configuration for JupyterHub (examples/platforms/
# jupyterhub/janitor.yaml): no workspace label, the same selector.
JANITOR_CONFIG = "/usr/local/etc/jupyterhub/pvc-janitor/janitor.yaml"
# janitor restore waits for the claim to be Bound (--restore-timeout); keep
# it below the spawner's start_timeout.
RESTORE_TIMEOUT = "4m"


async def _claim_exists(spawner):
    try:
        await spawner.api.read_namespaced_persistent_volume_claim(
            name=spawner.pvc_name, namespace=spawner.namespace
        )
    except ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


async def restore_home(spawner):
    """Restore claim-<user> from its newest rescue when it is missing."""
    if not spawner.storage_pvc_ensure:
        return
    if await _claim_exists(spawner):
        return  # the home is there: nothing to do
    target = f"{spawner.namespace}/{spawner.pvc_name}"
    proc = await asyncio.create_subprocess_exec(
        *JANITOR,
        "restore",
        target,
        "--config",
        JANITOR_CONFIG,
        "--restore-timeout",
        RESTORE_TIMEOUT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    msg = err.decode(errors="replace").strip()
    if proc.returncode == 0:
        spawner.log.info("janitor restored %s: %s", target, out.decode(errors="replace").strip())
        return
    if proc.returncode == 2 and f"no rescue of claim {target} found" in msg:
        return  # a new user (or one whose home was never rescued)
    # Anything else (a rescue that is not intact, a refusal because newer
    # data may exist, a restore that did not bind in time) stops the spawn:
    # starting now would give the user an empty home while their work sits
    # in a rescue. An administrator reads the message and decides.
    raise RuntimeError(f"janitor restore {target} failed (exit {proc.returncode}): {msg}")


c.KubeSpawner.pre_spawn_hook = restore_home  # noqa: F821 (c is the hub's config object)
