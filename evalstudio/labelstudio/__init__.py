"""Talking to Label Studio: the one client module that wraps label-studio-sdk (`client`), the connection settings
(`connection`) and the local server evalstudio starts for you (`server`)."""
