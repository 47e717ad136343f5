"""The engines' own template code as test oracles (LMDeploy, LLaMA-Factory, Ollama via Go).

Each loader imports only an engine's template module, from a folder named by an environment
variable (CHATLAB_ORACLE_SITE, default ~/.cache/chatlab-oracles: a `pip install --no-deps
--target` folder holding lmdeploy 0.18 and llamafactory 0.9.5; .ci/run fills it), stubbing the few heavy imports those modules make at the top and never
call for templates. A test whose oracle is absent skips and says how to install it.
"""
