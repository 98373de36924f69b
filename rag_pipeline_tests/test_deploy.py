"""deploy/: the image, the compose file, its Dagster instance and the Helm chart's values.

No Docker daemon or Kubernetes cluster exists where these tests run, so they check configuration:
the instance YAML through Dagster's own loading (and, with a test PostgreSQL, as a real
instance), every compose command against the installed entry points' ``--help``, the names
shared between files, and the Helm values through dagster-k8s, rendering the Job the K8s run
launcher would submit. What the chart's templates do with the values is emulated here, following
helm/dagster/templates in dagster-io/dagster (``_run-launcher.tpl``,
``dagster-user-deployments/templates/helpers/_helpers.tpl``), not rendered by helm.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import subprocess
import sys
import sysconfig
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import yaml
from pydantic import BaseModel

from rag_pipeline.config import Settings, _ConventionalEnvSource
from rag_pipeline.defs.instance import DAGSTER_ENVIRONMENT, POSTGRES_DAGSTER_ENVIRONMENT
from rag_pipeline.defs.queue import LOCATION
from rag_pipeline.defs.runs import WORKSPACE_TAG

CHECKOUT = Path(__file__).resolve().parents[1]
DEPLOY = CHECKOUT / "deploy"
COMPOSE = yaml.safe_load((DEPLOY / "docker-compose.yaml").read_text())
INSTANCE = yaml.safe_load((DEPLOY / "dagster.yaml").read_text())
WORKSPACE = yaml.safe_load((DEPLOY / "workspace.yaml").read_text())
HELM = yaml.safe_load((DEPLOY / "helm" / "values.yaml").read_text())
PYPROJECT = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())
IMAGE = "rag-pipeline:latest"
# The services built from this checkout (the others run PostgreSQL's and Qdrant's images).
OURS = {name: service for name, service in COMPOSE["services"].items() if service["image"] == IMAGE}
DEPLOY_EXTRA = "pip install -e '.[deploy]' (dagster-docker, dagster-k8s)"


def setting_exists(name: str) -> bool:
    """Whether the environment variable ``name`` sets something in :class:`Settings`."""
    if name in _ConventionalEnvSource.VARIABLES:
        return True
    prefix = Settings.model_config.get("env_prefix", "")
    delimiter = Settings.model_config.get("env_nested_delimiter") or "__"
    if not name.startswith(prefix):
        return False
    model: type[BaseModel] = Settings
    parts = name.removeprefix(prefix).lower().split(delimiter)
    for depth, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            return False
        if depth < len(parts) - 1:
            annotation = field.annotation
            if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
                return False
            model = annotation
    return True


def env_references(config: Any) -> set[str]:
    """The variables a Dagster config reads (``{env: NAME}``), at any depth."""
    if isinstance(config, Mapping):
        if set(config) == {"env"}:
            return {config["env"]}
        return set().union(*(env_references(value) for value in config.values()))
    if isinstance(config, list):
        return set().union(*(env_references(value) for value in config))
    return set()


def help_text(command: Sequence[str]) -> str:
    """``--help`` of the command's executable and subcommands (the words before its first option),
    after checking that the executable is an installed console script."""
    executable, *rest = command
    scripts = importlib.metadata.entry_points(group="console_scripts", name=executable)
    assert scripts, f"{executable} is no console script of an installed package"
    words = []
    for word in rest:
        if word.startswith("-"):
            break
        words.append(word)
    script = Path(sysconfig.get_path("scripts")) / executable
    result = subprocess.run(
        [str(script), *words, "--help"], capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, f"{' '.join([executable, *words])}: {result.stderr[-2000:]}"
    return result.stdout


def assert_options_accepted(command: Sequence[str]) -> None:
    accepted = set(re.findall(r"(?<![\w-])--?[A-Za-z][\w-]*", help_text(command)))
    used = {word.split("=")[0] for word in command if word.startswith("-")}
    assert used <= accepted, f"{command[0]} does not take {sorted(used - accepted)}"


def option(command: Sequence[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_env_names_are_checked_against_the_settings() -> None:
    assert setting_exists("RAG_PIPELINE_CATALOG__URL")
    assert setting_exists("RAG_PIPELINE_DAGSTER__POSTGRES_URL")
    assert setting_exists("QDRANT_URL")
    assert not setting_exists("RAG_PIPELINE_CATALOG__URI")
    assert not setting_exists("RAG_PIPELINE_HOME__URL")
    assert not setting_exists("QDRANT_URI")


# The image ------------------------------------------------------------------------------------


def test_the_image_copies_everything_the_wheel_is_built_from() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    ignored = (DEPLOY / "Dockerfile.dockerignore").read_text().split()
    copied = {
        source
        for line in dockerfile.splitlines()
        if line.startswith("COPY ")
        for source in line.split()[1:-1]
    }
    packages = PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    needed = {"pyproject.toml", PYPROJECT["project"]["readme"], "vendor", *packages}
    assert needed <= copied
    assert not needed & set(ignored)
    assert 'pip install "/tmp/src[deploy]"' in dockerfile
    assert "deploy" in PYPROJECT["project"]["optional-dependencies"]


# docker-compose.yaml ----------------------------------------------------------------------------


def test_compose_runs_the_code_server_webserver_daemon_and_chat_page_from_the_image() -> None:
    executables = {name: service["command"][:2] for name, service in OURS.items()}
    assert executables == {
        "code-server": ["dagster", "code-server"],
        "webserver": ["dagster-webserver", "--host"],
        "daemon": ["dagster-daemon", "run"],
        "chat": ["rag-pipeline", "serve"],
    }
    assert {"postgres", "qdrant"} <= set(COMPOSE["services"])


@pytest.mark.parametrize("service", sorted(OURS))
def test_compose_command_is_an_installed_command_taking_its_options(service: str) -> None:
    assert_options_accepted(OURS[service]["command"])


def test_compose_code_server_healthcheck_is_an_installed_command() -> None:
    check = OURS["code-server"]["healthcheck"]["test"]
    assert check[0] == "CMD"
    assert_options_accepted(check[1:])
    assert option(check, "--port") == option(OURS["code-server"]["command"], "--port")


def test_compose_code_server_serves_the_projects_definitions_under_the_workspace_name() -> None:
    command = OURS["code-server"]["command"]
    assert option(command, "--module-name") == PYPROJECT["tool"]["dagster"]["module_name"]
    assert option(command, "--container-image") == IMAGE
    (location,) = WORKSPACE["load_from"]
    server = location["grpc_server"]
    assert server["host"] == "code-server"
    assert str(server["port"]) == option(command, "--port")
    assert server["location_name"] == option(command, "--location-name")
    # Runs that `index --parallel` queues name their location: the daemon must know it.
    assert server["location_name"] == LOCATION
    for service in ("webserver", "daemon"):
        assert option(OURS[service]["command"], "--workspace").endswith("/workspace.yaml")


def test_compose_environment_names_are_settings_or_dagster_instance_variables() -> None:
    environment = COMPOSE["x-environment"]
    dagster_environment = DAGSTER_ENVIRONMENT | POSTGRES_DAGSTER_ENVIRONMENT
    instance_variables = env_references(INSTANCE) | {"DAGSTER_HOME"} | set(dagster_environment)
    for name in environment:
        if name.startswith("DAGSTER_"):
            assert name in instance_variables, name
        else:
            assert setting_exists(name), name
    assert {"QDRANT_URL", "RAG_PIPELINE_CATALOG__URL", "RAG_PIPELINE_DAGSTER__POSTGRES_URL"} <= set(
        environment
    )
    assert dagster_environment.items() <= environment.items()  # the daemon and webserver's too
    # Every URL names the compose service it points at.
    hosts = {urlsplit(environment[name]).hostname for name in environment if name.endswith("URL")}
    assert hosts <= set(COMPOSE["services"])


def test_compose_services_share_the_home_volume_and_the_instance() -> None:
    home = COMPOSE["x-environment"]["RAG_PIPELINE_HOME"]
    dagster_home = COMPOSE["x-environment"]["DAGSTER_HOME"]
    for name, service in OURS.items():
        assert service["environment"] == COMPOSE["x-environment"], name
        assert f"home:{home}" in service["volumes"], name
        assert f"./dagster.yaml:{dagster_home}/dagster.yaml:ro" in service["volumes"], name
    for name in ("webserver", "daemon"):
        assert "/var/run/docker.sock:/var/run/docker.sock" in OURS[name]["volumes"]


def test_compose_names_what_the_docker_run_launcher_attaches_runs_to() -> None:
    launcher = INSTANCE["run_launcher"]["config"]
    home = COMPOSE["x-environment"]["RAG_PIPELINE_HOME"]
    assert launcher["network"] == COMPOSE["networks"]["default"]["name"]
    assert launcher["container_kwargs"]["volumes"] == [
        f"{COMPOSE['volumes']['home']['name']}:{home}"
    ]
    # A run container gets what the instance and the pipeline read, from the daemon's environment.
    passed = set(launcher["env_vars"])
    assert env_references(INSTANCE) <= passed
    assert passed <= set(OURS["daemon"]["environment"])
    assert {name for name in passed if not name.startswith("DAGSTER_")} == {
        name for name in COMPOSE["x-environment"] if not name.startswith("DAGSTER_")
    }


# dagster.yaml ----------------------------------------------------------------------------------


@pytest.fixture
def instance_environment(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {
        "DAGSTER_POSTGRES_USER": "dagster_user",
        "DAGSTER_POSTGRES_PASSWORD": "secret",
        "DAGSTER_POSTGRES_HOST": "postgres.invalid",
        "DAGSTER_POSTGRES_PORT": "5432",
        "DAGSTER_POSTGRES_DB": "dagster",
    }
    assert set(values) == env_references(INSTANCE)
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


def test_the_instance_yaml_resolves_to_postgres_queued_runs_and_docker_launches(
    instance_environment: dict[str, str],
) -> None:
    """Dagster's own loading: the YAML against the instance schema (InstanceRef.from_dir), then
    each configurable class's config against its schema, the environment resolved, as
    ``ConfigurableClassData.rehydrate`` does before it constructs (which for storage connects)."""
    pytest.importorskip("dagster_docker", reason=f"needs {DEPLOY_EXTRA}")
    from dagster._config import process_config, resolve_to_config_type
    from dagster._core.instance.ref import InstanceRef

    ref = InstanceRef.from_dir(str(DEPLOY))
    resolved = {}
    for part in ("storage", "run_coordinator", "run_launcher", "compute_logs"):
        data = getattr(ref, f"{part}_data")
        klass = getattr(importlib.import_module(data.module_name), data.class_name)
        result = process_config(resolve_to_config_type(klass.config_type()), data.config_dict)
        assert result.success, (part, result.errors)
        resolved[part] = (klass.__name__, result.value)
    storage_class, storage = resolved["storage"]
    assert storage_class == "DagsterPostgresStorage"
    assert storage["postgres_db"]["username"] == instance_environment["DAGSTER_POSTGRES_USER"]
    assert storage["postgres_db"]["port"] == 5432
    assert storage["postgres_db"]["scheme"] == "postgresql+psycopg2"
    coordinator_class, coordinator = resolved["run_coordinator"]
    assert coordinator_class == "QueuedRunCoordinator"
    assert coordinator["max_concurrent_runs"] >= 1
    [per_workspace] = coordinator["tag_concurrency_limits"]
    assert per_workspace["key"] == WORKSPACE_TAG
    # A workspace's runs side by side, with room left for another workspace's.
    assert 1 < per_workspace["limit"] < coordinator["max_concurrent_runs"]
    assert resolved["run_launcher"][0] == "DockerRunLauncher"
    assert resolved["compute_logs"][1]["base_dir"].startswith(
        COMPOSE["x-environment"]["RAG_PIPELINE_HOME"] + "/"
    )
    # Neither connects to anything when constructed.
    assert type(ref.run_launcher).__name__ == "DockerRunLauncher"
    assert type(ref.run_coordinator).__name__ == "QueuedRunCoordinator"
    assert ref.settings["run_monitoring"]["enabled"] is True


def test_the_instance_yaml_is_a_working_instance_on_postgres(
    postgres_url: str, instance_environment: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the test PostgreSQL (.ci/run): the whole instance, its tables in the test's schema
    (libpq's PGOPTIONS carries the fixture's search_path)."""
    pytest.importorskip("dagster_docker", reason=f"needs {DEPLOY_EXTRA}")
    from dagster import DagsterInstance
    from dagster._core.instance.ref import InstanceRef

    url = urlsplit(postgres_url)
    monkeypatch.setenv("DAGSTER_POSTGRES_USER", unquote(url.username or "postgres"))
    monkeypatch.setenv("DAGSTER_POSTGRES_PASSWORD", unquote(url.password or ""))
    monkeypatch.setenv("DAGSTER_POSTGRES_HOST", url.hostname or "localhost")
    monkeypatch.setenv("DAGSTER_POSTGRES_PORT", str(url.port or 5432))
    monkeypatch.setenv("DAGSTER_POSTGRES_DB", url.path.lstrip("/"))
    monkeypatch.setenv("PGOPTIONS", parse_qs(url.query)["options"][0])
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(DEPLOY))) as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        assert type(instance.run_launcher).__name__ == "DockerRunLauncher"
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        assert instance.run_monitoring_enabled
        assert instance.get_runs_count() == 0


# helm/values.yaml ------------------------------------------------------------------------------

DEPLOYMENT = HELM["dagster-user-deployments"]["deployments"][0]
K8S_LAUNCHER = HELM["runLauncher"]["config"]["k8sRunLauncher"]


def test_helm_values_launch_runs_as_kubernetes_jobs_on_external_postgres() -> None:
    assert HELM["runLauncher"]["type"] == "K8sRunLauncher"
    assert HELM["postgresql"]["enabled"] is False
    assert HELM["dagster-user-deployments"]["enabled"] is True
    assert DEPLOYMENT["includeConfigInLaunchedRuns"]["enabled"] is True
    coordinator = HELM["dagsterDaemon"]["runCoordinator"]
    assert coordinator["enabled"] is True
    assert coordinator["type"] == "QueuedRunCoordinator"
    assert HELM["dagsterDaemon"]["runMonitoring"]["enabled"] is True


def test_helm_user_code_env_names_are_settings() -> None:
    names = [variable["name"] for variable in DEPLOYMENT["env"]]
    assert {"QDRANT_URL", "RAG_PIPELINE_CATALOG__URL", "RAG_PIPELINE_HOME"} <= set(names)
    assert [name for name in names if not setting_exists(name)] == []


def test_helm_daemon_and_webserver_create_runs_with_one_planned_event_per_asset() -> None:
    switch = "DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS"
    for component in ("dagsterDaemon", "dagsterWebserver"):
        variables = {variable["name"]: variable["value"] for variable in HELM[component]["env"]}
        assert variables[switch] == POSTGRES_DAGSTER_ENVIRONMENT[switch], component


def test_helm_user_code_serves_the_projects_definitions() -> None:
    arguments = DEPLOYMENT["dagsterApiGrpcArgs"]
    command = ["dagster", "api", "grpc", "-h", "0.0.0.0", "-p", "3030", *arguments]
    assert_options_accepted(command)
    assert option(arguments, "--module-name") == PYPROJECT["tool"]["dagster"]["module_name"]


def test_helm_queued_run_coordinator_config_fits_dagster() -> None:
    """The chart writes queuedRunCoordinator's values into dagster.yaml (_run-coordinator.tpl)."""
    from dagster import QueuedRunCoordinator
    from dagster._config import process_config, resolve_to_config_type

    values = HELM["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    config = {
        "max_concurrent_runs": values["maxConcurrentRuns"],
        "tag_concurrency_limits": values["tagConcurrencyLimits"],
    }
    result = process_config(resolve_to_config_type(QueuedRunCoordinator.config_type()), config)
    assert result.success, result.errors
    [per_workspace] = values["tagConcurrencyLimits"]
    assert per_workspace["key"] == WORKSPACE_TAG
    assert 1 < per_workspace["limit"] < values["maxConcurrentRuns"]


def test_helm_values_render_a_run_job_with_the_image_env_and_home_volume(tmp_path: Path) -> None:
    """The K8s run launcher configured as the chart writes it from these values, given a code
    location's container context as the user code chart writes it, builds the Job it would
    submit: every Kubernetes field is checked against the kubernetes client's models."""
    pytest.importorskip("dagster_k8s", reason=f"needs {DEPLOY_EXTRA}")
    from dagster._config import process_config, resolve_to_config_type
    from dagster._core.code_pointer import ModuleCodePointer
    from dagster._core.origin import JobPythonOrigin, RepositoryPythonOrigin
    from dagster._core.storage.dagster_run import DagsterRun
    from dagster_k8s import K8sRunLauncher
    from dagster_k8s.job import construct_dagster_k8s_job

    # No cluster: a kubeconfig naming an unreachable server, which nothing contacts.
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "none", "cluster": {"server": "https://127.0.0.1:9"}}],
                "users": [{"name": "none", "user": {}}],
                "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
                "current-context": "none",
            }
        )
    )
    # _run-launcher.tpl's "dagsterYaml.runLauncher.k8s", for the keys these values set.
    launcher_config = {
        "load_incluster_config": False,  # the values say true: in a pod
        "kubeconfig_file": str(kubeconfig),
        "job_namespace": "rag-pipeline",
        "image_pull_policy": K8S_LAUNCHER["imagePullPolicy"],
        "service_account_name": "rag-pipeline-dagster",
        "dagster_home": "/opt/dagster/dagster_home",
        "instance_config_map": "rag-pipeline-dagster-instance",
        "postgres_password_secret": HELM["global"]["postgresqlSecretName"],
        "env_vars": K8S_LAUNCHER["envVars"],
        "volume_mounts": K8S_LAUNCHER["volumeMounts"],
        "volumes": K8S_LAUNCHER["volumes"],
        "resources": K8S_LAUNCHER["resources"],
        "run_k8s_config": {"pod_spec_config": K8S_LAUNCHER["runK8sConfig"]["podSpecConfig"]},
    }
    assert K8S_LAUNCHER["loadInclusterConfig"] is True
    result = process_config(resolve_to_config_type(K8sRunLauncher.config_type()), launcher_config)
    assert result.success, result.errors
    launcher = K8sRunLauncher(**result.value)
    # dagster-user-deployments' "dagsterUserDeployments.k8sContainerContext".
    context = {
        "k8s": {
            "image_pull_policy": DEPLOYMENT["image"]["pullPolicy"],
            "env_config_maps": [f"rag-pipeline-dagster-{DEPLOYMENT['name']}-user-env"],
            "volume_mounts": DEPLOYMENT["volumeMounts"],
            "volumes": DEPLOYMENT["volumes"],
            "namespace": "rag-pipeline",
            "service_account_name": "rag-pipeline-dagster-user-deployments",
            "env": DEPLOYMENT["env"],
            "run_k8s_config": {"pod_spec_config": {"automount_service_account_token": True}},
        }
    }
    if "resources" in DEPLOYMENT:  # the template adds them only when set
        context["k8s"]["resources"] = DEPLOYMENT["resources"]
    image = f"{DEPLOYMENT['image']['repository']}:{DEPLOYMENT['image']['tag']}"
    module = option(DEPLOYMENT["dagsterApiGrpcArgs"], "--module-name")
    origin = JobPythonOrigin(
        "index_documents",
        RepositoryPythonOrigin(
            executable_path=sys.executable,
            code_pointer=ModuleCodePointer(module, "defs", working_directory=None),
            container_image=image,
            container_context=context,
        ),
    )
    run = DagsterRun(job_name="index_documents", run_id="0" * 36, job_code_origin=origin)
    run_context = launcher.get_container_context_for_run(run)
    job = construct_dagster_k8s_job(
        job_config=run_context.get_k8s_job_config(job_image=image, run_launcher=launcher),
        args=["dagster", "api", "execute_run", "{}"],
        job_name="dagster-run-0",
        pod_name="dagster-run-0",
        component="run_worker",
        user_defined_k8s_config=run_context.run_k8s_config,
    )
    pod = job.spec.template.spec
    (container,) = pod.containers
    assert container.image == image
    env = {variable.name: variable for variable in container.env}
    assert env["QDRANT_URL"].value.startswith("http")
    assert env["RAG_PIPELINE_CATALOG__URL"].value_from.secret_key_ref.name == "rag-pipeline"
    postgres_secret = HELM["global"]["postgresqlSecretName"]
    assert env["DAGSTER_PG_PASSWORD"].value_from.secret_key_ref.name == postgres_secret
    home = env["RAG_PIPELINE_HOME"].value
    (mount,) = [mount for mount in container.volume_mounts if mount.mount_path == home]
    (volume,) = [volume for volume in pod.volumes if volume.name == mount.name]
    assert volume.persistent_volume_claim.claim_name == "rag-pipeline-home"
    assert pod.security_context.fs_group == DEPLOYMENT["podSecurityContext"]["fsGroup"]
    assert container.resources.requests == K8S_LAUNCHER["resources"]["requests"]
