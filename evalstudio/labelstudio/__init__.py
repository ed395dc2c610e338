"""Talking to Label Studio: the one client module that wraps label-studio-sdk (`client`), the connection settings
(`connection`) and the local server evalstudio starts for you (`server`). Uses label-studio-sdk, httpx and
evalstudio.base, values and protocols; the only room that talks to Label Studio's API."""
